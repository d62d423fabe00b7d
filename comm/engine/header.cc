#include "comm/engine/header.h"

#include <fmt/format.h>

#include <cstdlib>

namespace braid::comm {

transport::MessageMeta encodeHeader(const OpHeader& h) {
  transport::MessageMeta m;
  m.words[0] = h.seq;
  m.words[1] = uint64_t(h.coll) | uint64_t(h.dtype) << 8 | uint64_t(h.op) << 16 |
               uint64_t(h.family) << 24 | uint64_t(uint32_t(h.root + 1)) << 32;
  m.words[2] = h.count;
  m.words[3] = h.pieceBytes | uint64_t(h.tag & kMaxTag) << 32;
  return m;
}

OpHeader decodeHeader(const transport::MessageMeta& m) {
  OpHeader h;
  h.seq = m.words[0];
  h.coll = static_cast<Collective>(m.words[1] & 0xff);
  h.dtype = static_cast<DataType>((m.words[1] >> 8) & 0xff);
  h.op = static_cast<RedOp>((m.words[1] >> 16) & 0xff);
  h.family = static_cast<Algorithm>((m.words[1] >> 24) & 0xff);
  h.root = static_cast<int>(uint32_t(m.words[1] >> 32)) - 1;
  h.count = m.words[2];
  h.pieceBytes = static_cast<uint32_t>(m.words[3]);
  h.tag = static_cast<uint32_t>(m.words[3] >> 32) & kMaxTag;
  return h;
}

std::string encodeAbortReason(ErrorCode code, const std::string& message) {
  return fmt::format("{}|{}", int(code), message);
}

ErrorCode decodeAbortReason(const std::string& reason, std::string* message) {
  ErrorCode code = ErrorCode::kRemoteError;
  *message = reason;
  const auto bar = reason.find('|');
  if (bar != std::string::npos && bar < 3) {
    if (std::atoi(reason.substr(0, bar).c_str()) == int(ErrorCode::kMismatch)) {
      code = ErrorCode::kMismatch;
    }
    *message = reason.substr(bar + 1);
  }
  return code;
}

std::string describeHeader(const OpHeader& h) {
  std::string text = fmt::format("{} #{} ({} x {}", collectiveName(h.coll), h.seq, h.count,
                                 isValid(h.dtype) ? dataTypeName(h.dtype) : "?");
  bool reduces = h.coll == Collective::kAllReduce || h.coll == Collective::kReduceScatter ||
                 h.coll == Collective::kReduce;
  if (reduces) text += fmt::format(", {}", isValid(h.op) ? redOpName(h.op) : "?");
  if (h.root >= 0) text += fmt::format(", root {}", h.root);
  if (h.tag != 0) text += fmt::format(", tag {}", h.tag);
  text += fmt::format(", {}, {}-byte pieces)", algorithmName(h.family), h.pieceBytes);
  return text;
}

}  // namespace braid::comm
