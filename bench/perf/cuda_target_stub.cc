// --device cuda in a build without CUDA: a clear error instead of a missing flag.
#include "bench/perf/target.h"
#include "common/error.h"

namespace braid::bench {

std::unique_ptr<Target> makeCudaTarget(World& world, const CollInfo&, const Options&) {
  fail(ErrorCode::kInvalidUsage,
       "rank {}: --device cuda: this build of braid has no CUDA (configure where nvcc is found)",
       world.rank());
}

}  // namespace braid::bench
