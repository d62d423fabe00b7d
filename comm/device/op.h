// The checks of one device call (pure, unit-tested without a GPU with a mock classifier): the
// host path's (comm/detail/op_plan.h) plus what is the device's: no barrier, buffers in device
// memory on the communicator's device.
#pragma once

#include <cstddef>

#include "braid/braid.hpp"
#include "comm/detail/op_plan.h"
#include "comm/device/pointer.h"

namespace braid::comm::device {

/// One device call: the host path's description (comm/detail/op_plan.h).
using DeviceOp = comm::OpDesc;

/// comm/detail/op_rules.h's isInPlace for `op`.
bool isInPlace(const DeviceOp& op, int rank);
using comm::readsInput;
using comm::writesOutput;

/// For a call with count > 0 that passed comm::validateOp (`inBytes`, `outBytes`: this rank's
/// buffer sizes): kInvalidUsage for a barrier (no device form), buffers that are not device
/// memory on `device` (per `classifier`), and partially overlapping buffers. Touches nothing.
void checkDeviceBuffers(const DeviceOp& op, int rank, int device,
                        const PointerClassifier& classifier, size_t inBytes, size_t outBytes);

/// comm::validateOp, then checkDeviceBuffers when count > 0.
void validateOp(const DeviceOp& op, int rank, int size, int device,
                const PointerClassifier& classifier);

}  // namespace braid::comm::device
