#include "bench/format/table.h"

#include <fmt/printf.h>

namespace braid::bench {
namespace {

std::string formatMeasurement(const Measurement& m) {
  if (!m.checked) {
    return fmt::sprintf("  %7s  %6.2f  %6.2f  %5s", formatTime(m.timeUs), m.algBw, m.busBw, "N/A");
  }
  return fmt::sprintf("  %7s  %6.2f  %6.2f  %5g", formatTime(m.timeUs), m.algBw, m.busBw,
                      static_cast<double>(m.wrong));
}

// Baseline columns, appended after the in-place ones: "  mpi time  mpi busbw  braid/mpi".
constexpr int kBaseTimeWidth = 8;
constexpr int kBaseBwWidth = 9;

}  // namespace

std::string formatTime(double timeUs, int width) {
  if (timeUs >= 10000.0) return fmt::sprintf("%*.0f", width, timeUs);
  if (timeUs >= 100.0) return fmt::sprintf("%*.1f", width, timeUs);
  return fmt::sprintf("%*.2f", width, timeUs);
}

std::string formatParamsLine(uint64_t minBytes, uint64_t maxBytes, uint64_t stepBytes,
                             uint64_t stepFactor, int warmupIters, int iters, int aggIters,
                             bool check, int threads) {
  return fmt::sprintf(
      "# nThread %d nGpus %d minBytes %lu maxBytes %lu step: %lu(%s) warmup iters: %d iters: %d "
      "agg iters: %d validation: %d graph: %d\n",
      threads, 1, minBytes, maxBytes, stepFactor > 1 ? stepFactor : stepBytes,
      stepFactor > 1 ? "factor" : "bytes", warmupIters, iters, aggIters, check ? 1 : 0, 0);
}

std::string formatDeviceLine(int rank, int pid, const std::string& host, int device,
                             const std::string& label) {
  return fmt::sprintf("#  Rank %2d Group %2d Pid %6d on %10s device %2d %s\n", rank, 0, pid, host,
                      device, label);
}

std::string formatHeader(bool withBaseline) {
  std::string line1 = fmt::sprintf(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          ",
      "", "", "", "", "");
  std::string line2 = fmt::sprintf(
      "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s", "size", "count", "type",
      "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::string line3 = fmt::sprintf(
      "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s", "(B)", "(elements)",
      "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  if (withBaseline) {
    // line1 already ends in 10 spaces past "in-place"; the baseline title goes after them.
    line1 += fmt::sprintf(" %*s", kBaseTimeWidth + kBaseBwWidth * 2 + 4, "MPI, out-of-place");
    line2 += fmt::sprintf("  %*s  %*s  %*s", kBaseTimeWidth, "mpi time", kBaseBwWidth, "mpi busbw",
                          kBaseBwWidth, "braid/mpi");
    line3 += fmt::sprintf("  %*s  %*s  %*s", kBaseTimeWidth, "(us)", kBaseBwWidth, "(GB/s)",
                          kBaseBwWidth, "");
  }
  return line1 + "\n" + line2 + "\n" + line3 + "\n";
}

std::string formatRow(const Row& row) {
  std::string out =
      fmt::sprintf("%12lu  %12lu  %8s  %6s  %6d", row.bytes, row.count, row.type, row.op, row.root);
  out += formatMeasurement(row.outOfPlace);
  out += formatMeasurement(row.inPlace);
  if (row.baseline) {
    const Baseline& b = *row.baseline;
    if (b.available) {
      // Same bytes and bus factor, so the busbw ratio is the time ratio.
      double ratio = row.outOfPlace.timeUs > 0 ? b.timeUs / row.outOfPlace.timeUs : 0;
      out += fmt::sprintf("  %s  %*.2f  %*.2f", formatTime(b.timeUs, kBaseTimeWidth), kBaseBwWidth,
                          b.busBw, kBaseBwWidth, ratio);
    } else {
      out += fmt::sprintf("  %*s  %*s  %*s", kBaseTimeWidth, "n/a", kBaseBwWidth, "n/a",
                          kBaseBwWidth, "n/a");
    }
  }
  return out + "\n";
}

std::string formatFooter(int64_t wrong, double avgBusBw) {
  return fmt::sprintf("# Out of bounds values : %d %s\n# Avg bus bandwidth    : %g \n#\n", wrong,
                      wrong ? "FAILED" : "OK", avgBusBw);
}

}  // namespace braid::bench
