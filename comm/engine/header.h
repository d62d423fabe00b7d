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
  Algorithm family = Algorithm::kRing;
  int root = -1;
  uint64_t count = 0;
  uint32_t pieceBytes = 0;  ///< slot payload size (ranks must agree on BRAID_CHUNK)
  uint32_t tag = 0;         ///< send/recv: the caller's tag (below kMaxTag + 1); 0 otherwise
};

/// The largest tag a header carries (31 bits: the top bit of its word marks probes).
constexpr uint32_t kMaxTag = 0x7fffffff;

transport::MessageMeta encodeHeader(const OpHeader& header);
OpHeader decodeHeader(const transport::MessageMeta& meta);
/// "allreduce #3 (1024 x float, sum, ring)" — no rank; callers add who said it.
std::string describeHeader(const OpHeader& header);

/// A probe: a header-only message (0 bytes) a rank sends to the peers it has waited on for a
/// while (ProgramRunner, slow path), so that two ranks which disagree and only receive (reduce's
/// root against broadcast's non-root) still meet a header to compare. Marked by the top bit of
/// word 3 (piece sizes are 32-bit); receivers drop probes, never use them as data.
constexpr uint64_t kProbeBit = uint64_t(1) << 63;
inline bool isProbe(const transport::MessageMeta& meta) { return (meta.words[3] & kProbeBit) != 0; }
inline transport::MessageMeta probeOf(transport::MessageMeta meta) {
  meta.words[3] |= kProbeBit;
  return meta;
}

/// The reason a failing rank sends its peers (transport signalAbort): "<code>|<message>", so a
/// mismatch found on one rank stays a mismatch on all.
std::string encodeAbortReason(ErrorCode code, const std::string& message);
/// Splits a peer's reason: the code it carries (kMismatch stays kMismatch, anything else becomes
/// kRemoteError) and, in *message, the text after the bar (all of it when there is none).
ErrorCode decodeAbortReason(const std::string& reason, std::string* message);

}  // namespace braid::comm
