// The text nccl-tests prints, character for character (its printf formats), plus braid's optional
// MPI baseline columns. Pure formatting: no I/O, no communicator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace braid::bench {

/// One placement's measurement (out-of-place or in-place).
struct Measurement {
  double timeUs = 0;    ///< time per op, microseconds
  double algBw = 0;     ///< GB/s (1e9 bytes/s) of the row's size
  double busBw = 0;     ///< algBw * the collective's bus factor
  int64_t wrong = 0;    ///< wrong elements summed over ranks
  bool checked = true;  ///< false with -c 0: prints N/A
};

/// The MPI collective timed on the same buffers (out-of-place only).
struct Baseline {
  bool available = false;  ///< false: no MPI equivalent for this type/op (prints n/a)
  double timeUs = 0;
  double busBw = 0;
};

/// One row of the table.
struct Row {
  size_t bytes = 0;  ///< nccl-tests' size column
  size_t count = 0;  ///< nccl-tests' count column (elements)
  std::string type;  ///< "float", ...
  std::string op;    ///< "sum", ... or "none"
  int root = -1;     ///< -1 where the collective has no root
  Measurement outOfPlace;
  Measurement inPlace;
  std::optional<Baseline> baseline;
};

/// "# nThread T nGpus 1 minBytes .. maxBytes .. step: ..(factor|bytes) warmup iters: .. ..."
/// (T: rank threads per process, -t).
std::string formatParamsLine(uint64_t minBytes, uint64_t maxBytes, uint64_t stepBytes,
                             uint64_t stepFactor, int warmupIters, int iters, int aggIters,
                             bool check, int threads = 1);
/// "#  Rank  0 Group  0 Pid  12345 on   hostname device  0 [cpu] host memory" (label: what
/// follows the device number; nccl-tests prints "[0x06] NVIDIA H200" for a GPU).
std::string formatDeviceLine(int rank, int pid, const std::string& host, int device,
                             const std::string& label = "[cpu] host memory");
/// The three header lines (each ending in '\n'), with the baseline columns when asked.
std::string formatHeader(bool withBaseline);
/// One row, ending in '\n'.
std::string formatRow(const Row& row);
/// "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    : X ", "#".
std::string formatFooter(int64_t wrong, double avgBusBw);
/// nccl-tests' time column: %7.2f below 100 us, %7.1f below 10000 us, %7.0f above.
std::string formatTime(double timeUs, int width = 7);

}  // namespace braid::bench
