#include "comm/bootstrap/secret.h"

#include <fmt/format.h>
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

namespace {

uint64_t rotl(uint64_t x, int bits) { return (x << bits) | (x >> (64 - bits)); }

struct SipState {
  uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1;
    v1 = rotl(v1, 13) ^ v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16) ^ v2;
    v0 += v3;
    v3 = rotl(v3, 21) ^ v0;
    v2 += v1;
    v1 = rotl(v1, 17) ^ v2;
    v2 = rotl(v2, 32);
  }
  void absorb(uint64_t m) {
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
};

uint64_t littleEndian(const unsigned char* bytes, size_t n) {
  uint64_t x = 0;
  for (size_t i = 0; i < n; ++i) x |= uint64_t{bytes[i]} << (8 * i);
  return x;
}

}  // namespace

uint64_t sipHash24(const uint8_t (&key)[16], const std::string& message) {
  const uint64_t k0 = littleEndian(key, 8), k1 = littleEndian(key + 8, 8);
  SipState s{k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull, k0 ^ 0x6c7967656e657261ull,
             k1 ^ 0x7465646279746573ull};
  const auto* bytes = reinterpret_cast<const unsigned char*>(message.data());
  const size_t n = message.size(), whole = n - n % 8;
  for (size_t i = 0; i < whole; i += 8) s.absorb(littleEndian(bytes + i, 8));
  s.absorb(littleEndian(bytes + whole, n - whole) | (uint64_t{n & 0xff} << 56));
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

std::string secretProof(const std::string& secret, const std::string& salt) {
  uint8_t key[16] = {};
  for (size_t i = 0; i < salt.size(); ++i) key[i % 16] ^= static_cast<uint8_t>(salt[i]);
  return fmt::format("{:016x}", sipHash24(key, "braid job secret:" + secret));
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
