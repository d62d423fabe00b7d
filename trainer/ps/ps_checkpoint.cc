#include "trainer/ps/ps_checkpoint.h"

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <limits>

#include "common/error.h"

namespace braid::trainer::ps {
namespace {

constexpr int64_t kNone = std::numeric_limits<int64_t>::max();  // workers' share of a kMin

int64_t minOverRanks(Communicator& world, int64_t v) {
  world.allReduce(&v, &v, 1, DataType::kInt64, RedOp::kMin);
  return v;
}

CheckpointState loadStep(const std::string& dir, int64_t step) {
  const std::string path = fmt::format("{}/ckpt-{}.bin", dir, step);
  std::ifstream in(path, std::ios::binary);
  BRAID_ENFORCE(in.good(), ErrorCode::kInvalidUsage, "cannot read checkpoint '{}'", path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return decodeCheckpoint(bytes, path);
}

}  // namespace

std::string serverCheckpointDir(const std::string& dir, int serverRank) {
  return fmt::format("{}/server-{}", dir, serverRank);
}

ResumePoint agreeOnResume(Communicator& world, const PsLayout& layout, const std::string& dir,
                          const CheckpointFingerprint& fingerprint, int64_t batchesPerEpoch) {
  const int rank = world.rank();
  const bool server = layout.isServer(rank);
  const std::string mine = serverCheckpointDir(dir, rank);
  std::string error;
  int64_t newest = kNone;
  if (server) {
    try {
      newest = decodeCheckpoint(loadNewestCheckpoint(mine, stderr).bytes, mine).step;
    } catch (const Error& e) {
      error = e.what();
      newest = -1;
    }
  }
  const int64_t step = minOverRanks(world, newest);
  if (step < 0) {
    fail(ErrorCode::kInvalidUsage, "rank {}: --resume: {}", rank,
         error.empty() ? "a server has no usable checkpoint (its own error names it)" : error);
  }
  ResumePoint point;
  int64_t position = kNone;
  if (server) {
    try {
      CheckpointState s = loadStep(mine, step);
      checkFingerprint(s.fingerprint, fingerprint, fmt::format("{}/ckpt-{}.bin", mine, step));
      position = static_cast<int64_t>(s.sampler.epoch) * batchesPerEpoch +
                 static_cast<int64_t>(s.sampler.batch);
      point.state = std::move(s);
    } catch (const Error& e) {
      error = e.what();
      position = -1;
    }
  }
  point.position = minOverRanks(world, position);
  if (point.position < 0) {
    fail(ErrorCode::kInvalidUsage, "rank {}: --resume from version {}: {}", rank, step,
         error.empty() ? "a server cannot load it (its own error names it)" : error);
  }
  return point;
}

}  // namespace braid::trainer::ps
