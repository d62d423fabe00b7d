#include "comm/bootstrap/secret.h"

#include <sys/random.h>

#include <cerrno>
#include <mutex>

#include "common/env.h"
#include "common/error.h"
#include "common/log.h"

namespace braid::bootstrap {

std::string jobSecret() {
  if (auto secret = envString("BRAID_SECRET")) return *secret;
  static std::once_flag warned;
  std::call_once(warned, [] {
    BRAID_WARN(
        "BRAID_SECRET is not set: the bootstrap store uses a fixed well-known secret, so any "
        "local process could join this job (launch with braidrun, or set BRAID_SECRET)");
  });
  return "braid-insecure-default-secret";
}

std::string randomSecret(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = ::getrandom(raw.data() + done, bytes - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      failErrno("getrandom() for the job secret", errno);
    }
    done += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes);
  for (unsigned char c : raw) {
    hex.push_back(kHex[c >> 4]);
    hex.push_back(kHex[c & 15]);
  }
  return hex;
}

bool secretsEqual(const std::string& a, const std::string& b) {
  // Walk the longer length in full and accumulate differences without branching on them.
  size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

}  // namespace braid::bootstrap
