// The integer a key holds for Store::add(), shared by the in-memory store and the TCP server.
#pragma once

#include <cstdint>
#include <string>

namespace braid::bootstrap {

/// `text` (decimal, "" = 0) plus `delta`. Returns false with `why` set when `text` is not an
/// integer or the sum does not fit 64 bits; the stored value then stays as it was.
bool addToCounter(const std::string& text, int64_t delta, int64_t* sum, std::string* why);

}  // namespace braid::bootstrap
