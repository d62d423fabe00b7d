#include "comm/device/op.h"

#include "comm/detail/op_rules.h"
#include "common/error.h"

namespace braid::comm::device {

bool isInPlace(const DeviceOp& d, int rank) {
  return comm::isInPlace(d.coll, d.input, d.output, d.count, rank, dataTypeSize(d.dtype));
}

void checkDeviceBuffers(const DeviceOp& d, int rank, int device,
                        const PointerClassifier& classifier, size_t inBytes, size_t outBytes) {
  BRAID_ENFORCE(d.coll != Collective::kBarrier, ErrorCode::kInvalidUsage,
                "rank {}: barrier has no device form (synchronise the stream instead)", rank);
  if (readsInput(d, rank))
    requireDeviceBuffer(classifier, d.input, inBytes, device, "send", rank, d.coll);
  if (writesOutput(d, rank))
    requireDeviceBuffer(classifier, d.output, outBytes, device, "receive", rank, d.coll);
  comm::requireNoOverlap(d, rank, inBytes, outBytes);
}

void validateOp(const DeviceOp& d, int rank, int size, int device,
                const PointerClassifier& classifier) {
  BRAID_ENFORCE(d.coll != Collective::kBarrier, ErrorCode::kInvalidUsage,
                "rank {}: barrier has no device form (synchronise the stream instead)", rank);
  size_t inBytes, outBytes;
  comm::validateOp(d, rank, size, &inBytes, &outBytes);
  if (d.count > 0) checkDeviceBuffers(d, rank, device, classifier, inBytes, outBytes);
}

}  // namespace braid::comm::device
