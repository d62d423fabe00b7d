#include "transport/cuda_ipc/record.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>

#include "common/error.h"

namespace braid::transport::cuda_ipc {
namespace {

constexpr const char* kPrefix = "cipc1:";
constexpr size_t kMaxSegmentName = 200;

/// Appends the bytes of `value` as hex.
template <typename T>
void put(std::string& out, const T& value) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  for (unsigned char b : bytes) out += fmt::format("{:02x}", b);
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

struct Reader {
  const std::string& text;
  size_t pos;
  const std::string& who;

  void bytes(void* out, size_t n) {
    if (pos + 2 * n > text.size()) {
      fail(ErrorCode::kInternal, "cuda_ipc: record from {} is truncated ({} characters)", who,
           text.size());
    }
    auto* p = static_cast<unsigned char*>(out);
    for (size_t i = 0; i < n; ++i) {
      int hi = hexDigit(text[pos + 2 * i]), lo = hexDigit(text[pos + 2 * i + 1]);
      if (hi < 0 || lo < 0) {
        fail(ErrorCode::kInternal, "cuda_ipc: record from {} has a bad character at {}", who,
             pos + 2 * i);
      }
      p[i] = static_cast<unsigned char>(hi * 16 + lo);
    }
    pos += 2 * n;
  }
  template <typename T>
  T get() {
    T v;
    bytes(&v, sizeof v);
    return v;
  }
};

}  // namespace

std::string encodeRecord(const PeerRecord& r) {
  BRAID_ENFORCE(r.segment.size() <= kMaxSegmentName, ErrorCode::kInternal,
                "cuda_ipc: segment name of {} bytes", r.segment.size());
  std::string out = kPrefix;
  put(out, r.rank);
  put(out, r.nranks);
  put(out, r.pid);
  put(out, r.processNonce);
  put(out, r.device);
  put(out, r.channels);
  put(out, r.slots);
  put(out, r.slotBytes);
  put(out, r.slotBase);
  put(out, r.handle);
  put(out, static_cast<uint32_t>(r.segment.size()));
  for (char c : r.segment) put(out, c);
  return out;
}

PeerRecord decodeRecord(const std::string& text, const std::string& who) {
  const std::string prefix = kPrefix;
  if (text.compare(0, prefix.size(), prefix) != 0) {
    fail(ErrorCode::kInternal, "cuda_ipc: record from {} is not a cuda_ipc record (version?)", who);
  }
  Reader in{text, prefix.size(), who};
  PeerRecord r;
  r.rank = in.get<uint32_t>();
  r.nranks = in.get<uint32_t>();
  r.pid = in.get<uint64_t>();
  r.processNonce = in.get<uint64_t>();
  r.device = in.get<int32_t>();
  r.channels = in.get<uint32_t>();
  r.slots = in.get<uint32_t>();
  r.slotBytes = in.get<uint64_t>();
  r.slotBase = in.get<uint64_t>();
  in.bytes(r.handle.data(), r.handle.size());
  const auto nameBytes = in.get<uint32_t>();
  if (nameBytes > kMaxSegmentName) {
    fail(ErrorCode::kInternal, "cuda_ipc: record from {} names a segment of {} bytes", who,
         nameBytes);
  }
  r.segment.resize(nameBytes);
  in.bytes(r.segment.data(), nameBytes);
  if (in.pos != text.size()) {
    fail(ErrorCode::kInternal, "cuda_ipc: record from {} has {} trailing characters", who,
         text.size() - in.pos);
  }
  return r;
}

uint64_t processNonce() {
  static const uint64_t nonce = [] {
    std::random_device rd;
    uint64_t v = (uint64_t(rd()) << 32) ^ rd();
    v ^= uint64_t(getpid()) * 0x9e3779b97f4a7c15ull;
    v ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return v | 1;  // never 0
  }();
  return nonce;
}

}  // namespace braid::transport::cuda_ipc
