// Per-epoch progress on stderr: a redrawn bar on a terminal, a plain line every ~10% otherwise.
#pragma once

#include <cstdint>

namespace braid::trainer {

/// Reports progress through one epoch of `total` steps. Only rank 0 makes one; quiet = silent.
class Progress {
 public:
  Progress(int epoch, int epochs, int64_t total, bool quiet);
  /// `done` steps of `total` are finished; `loss` is the running mean training loss.
  void update(int64_t done, double loss);
  /// Clears the bar line (terminal) before the epoch summary is printed.
  void finish();

 private:
  int epoch_, epochs_;
  int64_t total_;
  bool quiet_, tty_;
  int lastShown_ = -1;  // last percentage (terminal) or decile (plain) written
};

}  // namespace braid::trainer
