#include "comm/bootstrap/wire.h"

#include <fmt/format.h>

#include <algorithm>

namespace braid::bootstrap::wire {

std::string encodeRequest(const Request& request) {
  Writer body;
  body.u8(static_cast<uint8_t>(request.op));
  body.u8(0);
  body.u8(0);
  body.u8(0);
  body.u32(request.timeoutMs);
  body.i64(request.delta);
  body.u32(static_cast<uint32_t>(request.strings.size()));
  for (const auto& s : request.strings) body.str(s);
  Writer frame;
  frame.u32(static_cast<uint32_t>(body.bytes().size()));
  frame.raw(body.bytes());
  return std::move(frame.bytes());
}

Request decodeRequest(const char* data, size_t size) {
  Reader in(data, size);
  Request request;
  uint8_t op = in.u8();
  in.u8();
  in.u8();
  in.u8();
  request.timeoutMs = in.u32();
  request.delta = in.i64();
  uint32_t count = in.u32();
  size_t want = 0;
  switch (static_cast<Op>(op)) {
    case Op::kSet:
      want = 2;
      break;
    case Op::kGet:
    case Op::kAdd:
      want = 1;
      break;
    case Op::kWait:
      if (count == 0 || count > kMaxWaitKeys) {
        throw ParseError("wait on " + std::to_string(count) + " keys (allowed 1.." +
                         std::to_string(kMaxWaitKeys) + ")");
      }
      want = count;
      break;
    default:
      throw ParseError("unknown operation " + std::to_string(op));
  }
  if (count != want) {
    throw ParseError("operation " + std::to_string(op) + " with " + std::to_string(count) +
                     " strings");
  }
  request.op = static_cast<Op>(op);
  for (uint32_t i = 0; i < count; ++i) {
    bool isValue = request.op == Op::kSet && i == 1;
    request.strings.push_back(isValue ? in.str(kMaxValueBytes, "value")
                                      : in.str(kMaxKeyBytes, "key"));
  }
  if (in.left() != 0) throw ParseError("trailing bytes after the request");
  return request;
}

std::optional<size_t> completeFrame(const char* data, size_t size) {
  if (size < 4) return std::nullopt;
  const uint32_t len = loadU32(data);
  if (len > kMaxFrameBytes) {
    throw ParseError(fmt::format("frame of {} bytes exceeds the limit of {}", len, kMaxFrameBytes));
  }
  if (size - 4 < len) return std::nullopt;
  return len;
}

Reply decodeReply(const char* data, size_t size) {
  Reader in(data, size);
  Reply reply;
  reply.status = static_cast<ReplyStatus>(in.u8());
  in.u8();
  in.u8();
  in.u8();
  reply.number = in.i64();
  reply.text = in.str(kMaxValueBytes, "value");
  return reply;
}

size_t helloBytesWanted(const char* data, size_t have) {
  Writer magic;
  magic.u32(kMagic);
  for (size_t i = 0; i < std::min<size_t>(have, 4); ++i) {
    if (data[i] != magic.bytes()[i]) {
      throw ParseError(
          fmt::format("garbage instead of a handshake (byte {} is 0x{:02x}, not braid's magic)", i,
                      static_cast<uint8_t>(data[i])));
    }
  }
  if (have < kHandshakeBytes) return kHandshakeBytes - have;
  const uint32_t secretLen = loadU32(data + 12);
  if (secretLen > kMaxSecretBytes) {
    throw ParseError(fmt::format("handshake secret of {} bytes exceeds the limit of {}", secretLen,
                                 kMaxSecretBytes));
  }
  const size_t total = kHandshakeBytes + secretLen;
  if (have > total) throw ParseError("handshake longer than it says");
  return total - have;
}

ClientHello decodeHello(const char* data, size_t size) {
  Reader in(data, size);
  in.u32();  // magic, checked by helloBytesWanted()
  ClientHello hello;
  hello.version = in.u32();
  hello.worldSize = in.u32();
  hello.secret = in.str(kMaxSecretBytes, "handshake secret");
  if (in.left() != 0) throw ParseError("trailing bytes after the handshake");
  return hello;
}

}  // namespace braid::bootstrap::wire
