// The host medium's buffer checks (comm/detail/medium.h).
#include "comm/detail/medium.h"
#include "comm/detail/op_rules.h"
#include "common/error.h"

namespace braid::comm {

void HostMedium::checkBuffers(const OpDesc& d, size_t inBytes, size_t outBytes) const {
  const char* name = collectiveName(d.coll);
  BRAID_ENFORCE(!readsInput(d, rank_) || d.input != nullptr, ErrorCode::kInvalidUsage,
                "rank {}: {} of {} x {}: the send buffer is null", rank_, name, d.count,
                dataTypeName(d.dtype));
  BRAID_ENFORCE(!writesOutput(d, rank_) || d.output != nullptr, ErrorCode::kInvalidUsage,
                "rank {}: {} of {} x {}: the receive buffer is null", rank_, name, d.count,
                dataTypeName(d.dtype));
  requireNoOverlap(d, rank_, inBytes, outBytes);
}

}  // namespace braid::comm
