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
  *sum = current + delta;
  return true;
}

}  // namespace braid::bootstrap
