// The store's wire protocol (internal to comm/bootstrap). All integers little-endian.
//
// Handshake, client -> server: u32 magic, u32 version, u32 worldSize, u32 secretLen, secret.
// Handshake, server -> client: u32 magic, u32 status (HandshakeStatus), u32 version,
//                              u32 worldSize (the server's).
//   The server reads the client's handshake into a fixed buffer of kHandshakeBytes +
//   kMaxSecretBytes before anything else; a connection it drops before then gets no reply.
// Then frames, each u32 bodyLen + body, bodyLen <= kMaxFrameBytes:
//   request body:  u8 op, 3 x u8 zero, u32 timeoutMs, i64 delta, u32 count, count x string
//   reply body:    u8 status (ReplyStatus), 3 x u8 zero, i64 number, string
// where a string is u32 len + bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/bootstrap/store_base.h"

namespace braid::bootstrap::wire {

inline constexpr uint32_t kMagic = 0x53445242;  // "BRDS"
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kHandshakeBytes = 16;
inline constexpr size_t kMaxSecretBytes = 1024;
/// Large enough for one set of a maximal key and value, or a wait on kMaxWaitKeys maximal keys.
inline constexpr size_t kMaxFrameBytes = kMaxValueBytes + kMaxKeyBytes + 64;

enum class Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kWait = 4 };
enum class HandshakeStatus : uint32_t {
  kOk = 0,
  kBadVersion = 1,
  kBadWorldSize = 2,
  kBadSecret = 3,
  kBusy = 4,  ///< the store serves as many clients as it allows; retry
};
enum class ReplyStatus : uint8_t { kOk = 0, kTimeout = 1, kError = 2 };

/// Appends little-endian integers and strings.
class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void i64(int64_t v) {
    uint64_t u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void raw(const std::string& s) { out_.append(s); }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

/// Thrown by Reader on a truncated or malformed body.
struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Reads what Writer wrote, checking every length against what is left.
class Reader {
 public:
  Reader(const char* data, size_t size) : data_(data), size_(size) {}
  uint8_t u8() {
    need(1);
    return static_cast<uint8_t>(data_[pos_++]);
  }
  uint32_t u32() {
    need(4);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(data_[pos_ + i])} << (8 * i);
    pos_ += 4;
    return v;
  }
  int64_t i64() {
    need(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<uint8_t>(data_[pos_ + i])} << (8 * i);
    pos_ += 8;
    return static_cast<int64_t>(v);
  }
  /// A string of at most `limit` bytes.
  std::string str(size_t limit, const char* what) {
    uint32_t len = u32();
    if (len > limit) {
      throw ParseError(std::string(what) + " of " + std::to_string(len) +
                       " bytes exceeds the limit of " + std::to_string(limit));
    }
    need(len);
    std::string s(data_ + pos_, len);
    pos_ += len;
    return s;
  }
  size_t left() const { return size_ - pos_; }

 private:
  void need(size_t n) {
    if (size_ - pos_ < n) throw ParseError("truncated message");
  }
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

inline uint32_t loadU32(const char* p) {
  Reader r(p, 4);
  return r.u32();
}

/// A decoded request body.
struct Request {
  Op op = Op::kSet;
  uint32_t timeoutMs = 0;
  int64_t delta = 0;
  std::vector<std::string> strings;  ///< set: key, value; get/add: key; wait: keys
};

/// Encodes a request frame (length prefix included).
std::string encodeRequest(const Request& request);
/// Decodes a request body; throws ParseError on anything out of bounds.
Request decodeRequest(const char* body, size_t size);

/// The body length of the frame at the start of `data` once all of it has arrived; nullopt while
/// it is incomplete. Throws ParseError when the length prefix exceeds kMaxFrameBytes.
std::optional<size_t> completeFrame(const char* data, size_t size);

/// A decoded reply body.
struct Reply {
  ReplyStatus status = ReplyStatus::kOk;
  int64_t number = 0;
  std::string text;
};

/// Decodes a reply body; throws ParseError on anything out of bounds.
Reply decodeReply(const char* body, size_t size);

/// A client's handshake, the fields after the magic.
struct ClientHello {
  uint32_t version = 0;
  uint32_t worldSize = 0;
  std::string secret;
};

/// How many more bytes of a client's handshake to read after the first `have` arrived (0: it is
/// complete), so a reader never takes more than kHandshakeBytes + kMaxSecretBytes, nor a byte of
/// the first frame. Throws ParseError as soon as the bytes cannot be a handshake: a byte of the
/// magic is wrong, or the secret is longer than kMaxSecretBytes.
size_t helloBytesWanted(const char* data, size_t have);
/// Decodes a handshake that helloBytesWanted() calls complete.
ClientHello decodeHello(const char* data, size_t size);

}  // namespace braid::bootstrap::wire
