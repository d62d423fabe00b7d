#include "comm/bootstrap/wire.h"

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

}  // namespace braid::bootstrap::wire
