#include "trainer/train/sync_check.h"

#include <cstring>

#include "common/error.h"

namespace braid::trainer {

uint64_t hashFloats(const float* data, size_t count) {
  uint64_t h = 14695981039346656037ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(data);
  for (size_t i = 0; i < count * sizeof(float); ++i) {
    h ^= bytes[i];
    h *= 1099511628211ull;
  }
  return h;
}

void checkParamsInSync(Communicator& comm, const float* params, size_t count, int64_t step) {
  const uint64_t h = hashFloats(params, count);
  uint64_t v[2] = {h, ~h};  // min(~h) = ~max(h): one allReduce gives both min and max
  comm.allReduce(v, v, 2, DataType::kUint64, RedOp::kMin);
  const uint64_t minHash = v[0], maxHash = ~v[1];
  BRAID_ENFORCE(minHash == maxHash, ErrorCode::kMismatch,
                "--check-sync: rank {} of {}: parameters differ across ranks after step {} "
                "(this rank's hash {:016x}, min {:016x}, max {:016x}, {} floats)",
                comm.rank(), comm.size(), step, h, minHash, maxHash, count);
}

}  // namespace braid::trainer
