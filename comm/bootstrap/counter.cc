#include "comm/bootstrap/counter.h"

#include <charconv>

namespace braid::bootstrap {

bool addToCounter(const std::string& text, int64_t delta, int64_t* sum, std::string* why) {
  int64_t current = 0;
  if (!text.empty()) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
    if (ec != std::errc() || end != text.data() + text.size()) {
      *why = "the key holds a non-integer value";
      return false;
    }
  }
  // Any client holding the job secret picks both operands: a wrap would be undefined behaviour.
  if (__builtin_add_overflow(current, delta, sum)) {
    *why = "adding " + std::to_string(delta) + " to " + std::to_string(current) +
           " overflows a 64-bit integer";
    return false;
  }
  return true;
}

}  // namespace braid::bootstrap
