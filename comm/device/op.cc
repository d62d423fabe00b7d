#include "comm/device/op.h"

#include <cstdint>
#include <utility>

#include "comm/detail/op_rules.h"
#include "common/error.h"

namespace braid::comm::device {

bool isInPlace(const DeviceOp& d, int rank) {
  return comm::isInPlace(d.coll, d.input, d.output, d.count, rank, dataTypeSize(d.dtype));
}

void validateOp(const DeviceOp& d, int rank, int size, int device,
                const PointerClassifier& classifier) {
  BRAID_ENFORCE(d.coll != Collective::kBarrier, ErrorCode::kInvalidUsage,
                "rank {}: barrier has no device form (synchronise the stream instead)", rank);
  size_t inBytes, outBytes;
  comm::validateOp(d, rank, size, &inBytes, &outBytes);
  if (d.count == 0) return;
  const bool in = readsInput(d, rank), out = writesOutput(d, rank);
  if (in) requireDeviceBuffer(classifier, d.input, inBytes, device, "send", rank, d.coll);
  if (out) requireDeviceBuffer(classifier, d.output, outBytes, device, "receive", rank, d.coll);
  comm::requireNoOverlap(d, rank, inBytes, outBytes);
}

Plan planOp(const DeviceOp& d, int rank, int size, const TunerConfig& tuner, size_t slotBytes,
            double timeoutSeconds) {
  comm::Plan shared = comm::planOp(d, rank, size, tuner, slotBytes, timeoutSeconds,
                                   /*streamBytes=*/SIZE_MAX);
  Plan plan;
  plan.args = shared.args;
  plan.spec = shared.spec;
  plan.program = shared.isP2p ? std::move(shared.p2p) : buildProgram(shared.spec, rank);
  return plan;
}

}  // namespace braid::comm::device
