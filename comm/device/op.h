// One device collective call: its description, the argument checks (pure, unit-tested without a
// GPU) and its plan (schedule spec, message header, executor arguments), built exactly as the
// host path builds them so device and host ranks agree on schedules and headers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "braid/braid.hpp"
#include "comm/device/pointer.h"
#include "comm/exec/host_executor.h"
#include "comm/schedule/schedule.h"
#include "comm/tuner.h"

namespace braid::comm::device {

struct DeviceOp {
  Collective coll = Collective::kAllReduce;
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;  ///< as the API takes it (recvCount for reduceScatter, sendCount allGather)
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = -1;  ///< broadcast/reduce root, or the peer of send/recv
  uint64_t seq = 0;
};

/// comm/op_rules.h's isInPlace for `op`.
bool isInPlace(const DeviceOp& op, int rank);
/// Whether this rank reads its input / writes its output for `op`.
bool readsInput(const DeviceOp& op, int rank);
bool writesOutput(const DeviceOp& op, int rank);

/// Throws kInvalidUsage (naming rank, collective, size) for a bad dtype/op/root/peer, a byte
/// size overflow, null or partially overlapping buffers, or buffers that are not device memory on
/// `device` (per `classifier`). Touches nothing.
void validateOp(const DeviceOp& op, int rank, int size, int device,
                const PointerClassifier& classifier);

/// What the executor runs for one op.
struct Plan {
  ExecArgs args;
  ScheduleSpec spec;    ///< collectives
  RankProgram program;  ///< built here (p2p: one step on channel 0)
};

/// The plan of a validated, numbered op with count > 0. `tuner` picks the family as the host
/// path does; slotBytes is the transport's slot payload.
Plan planOp(const DeviceOp& op, int rank, int size, const TunerConfig& tuner, size_t slotBytes,
            double timeoutSeconds);

}  // namespace braid::comm::device
