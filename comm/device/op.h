// One device collective call: its description, the argument checks (pure, unit-tested without a
// GPU) and its plan (schedule spec, message header, executor arguments), built exactly as the
// host path builds them so device and host ranks agree on schedules and headers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "braid/braid.hpp"
#include "comm/device/pointer.h"
#include "comm/detail/op_plan.h"
#include "comm/schedule/schedule.h"
#include "comm/detail/tuner.h"

namespace braid::comm::device {

/// One device call: the host path's description (comm/detail/op_plan.h).
using DeviceOp = comm::OpDesc;

/// comm/detail/op_rules.h's isInPlace for `op`.
bool isInPlace(const DeviceOp& op, int rank);
using comm::readsInput;
using comm::writesOutput;

/// comm::validateOp, and kInvalidUsage for a barrier (no device form), buffers that are not
/// device memory on `device` (per `classifier`), and partially overlapping buffers. Touches
/// nothing.
void validateOp(const DeviceOp& op, int rank, int size, int device,
                const PointerClassifier& classifier);

/// What the executor runs for one op.
struct Plan {
  ExecArgs args;
  ScheduleSpec spec;    ///< collectives
  RankProgram program;  ///< built here (p2p: one step on channel 0)
};

/// comm::planOp for a validated, numbered op with count > 0 (outputs never streamed), with its
/// program built.
Plan planOp(const DeviceOp& op, int rank, int size, const TunerConfig& tuner, size_t slotBytes,
            double timeoutSeconds);

}  // namespace braid::comm::device
