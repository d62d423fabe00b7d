#include "trainer/train/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace braid::trainer {

Progress::Progress(int epoch, int epochs, int64_t total, bool quiet)
    : epoch_(epoch), epochs_(epochs), total_(total), quiet_(quiet), tty_(isatty(2) == 1) {}

void Progress::update(int64_t done, double loss) {
  if (quiet_ || total_ <= 0) return;
  const int percent = static_cast<int>(100 * done / total_);
  if (tty_) {
    if (percent == lastShown_ && done != total_) return;
    lastShown_ = percent;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / total_);
    std::string bar(filled, '#');
    bar.append(kWidth - filled, '.');
    fmt::print(stderr, "\repoch {}/{} [{}] {:3d}% {}/{} loss {:.4f}", epoch_, epochs_, bar, percent,
               done, total_, loss);
    std::fflush(stderr);
  } else {
    const int decile = percent / 10;
    if (decile == lastShown_ || decile == 0) return;
    lastShown_ = decile;
    fmt::print(stderr, "epoch {}/{}: {}% ({}/{} steps) loss {:.4f}\n", epoch_, epochs_, decile * 10,
               done, total_, loss);
  }
}

void Progress::finish() {
  if (quiet_ || !tty_) return;
  fmt::print(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace braid::trainer
