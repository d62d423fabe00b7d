// The per-job secret every store connection must present.
#pragma once

#include <cstddef>
#include <string>

namespace braid::bootstrap {

/// BRAID_SECRET, or (when unset) a fixed well-known string, with one warning per process saying
/// the store then accepts any local process that knows braid.
std::string jobSecret();

/// A fresh random secret: `bytes` bytes from getrandom(), as lower-case hex.
std::string randomSecret(size_t bytes = 16);

/// Compares in time that depends only on the lengths, not on where the texts differ.
bool secretsEqual(const std::string& a, const std::string& b);

}  // namespace braid::bootstrap
