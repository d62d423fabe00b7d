// Cuts one rank's output stream into whole lines, each prefixed with "[rank] ".
#pragma once

#include <cstddef>
#include <string>

namespace braid::braidrun {

/// Feed it bytes as they arrive; it returns the complete lines so far, prefixed. A partial line
/// is held back until its newline arrives (or finish()), so lines of different ranks never mix.
class LinePrefixer {
 public:
  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}
  /// The prefixed complete lines in data (plus earlier held-back text). A line longer than
  /// kMaxLine is cut there, so memory stays bounded.
  std::string feed(const char* data, size_t size);
  /// The held-back partial line, prefixed and newline-terminated ("" when none).
  std::string finish();

  static constexpr size_t kMaxLine = 1 << 20;

 private:
  std::string prefix_;
  std::string partial_;
};

}  // namespace braid::braidrun
