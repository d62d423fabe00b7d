// The message header: what each rank believes the collective is, carried in every message so a
// mismatch is caught before any received data is used (no extra round trip).
#pragma once

#include <cstdint>
#include <string>

#include "braid/braid.hpp"
#include "comm/schedule/schedule.h"
#include "transport/transport.h"

namespace braid::comm {

struct OpHeader {
  uint64_t seq = 0;  ///< collective sequence number (per communicator), or p2p number per peer
  Collective coll = Collective::kAllReduce;
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  Family family = Family::kRing;
  int root = -1;
  uint64_t count = 0;
  uint32_t pieceBytes = 0;  ///< slot payload size (ranks must agree on BRAID_CHUNK)
};

transport::MessageMeta encodeHeader(const OpHeader& header);
OpHeader decodeHeader(const transport::MessageMeta& meta);
/// "allreduce #3 (1024 x float, sum, ring)" — no rank; callers add who said it.
std::string describeHeader(const OpHeader& header);

/// The reason a failing rank sends its peers (transport signalAbort): "<code>|<message>", so a
/// mismatch found on one rank stays a mismatch on all.
std::string encodeAbortReason(ErrorCode code, const std::string& message);
/// Splits a peer's reason: the code it carries (kMismatch stays kMismatch, anything else becomes
/// kRemoteError) and, in *message, the text after the bar (all of it when there is none).
ErrorCode decodeAbortReason(const std::string& reason, std::string* message);

}  // namespace braid::comm
