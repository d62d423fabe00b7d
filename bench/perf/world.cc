#include "bench/perf/world.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/config.h"
#include "common/env.h"
#include "common/error.h"

#if BRAID_HAVE_MPI
// C bindings only: Open MPI's C++ bindings warn under -Wextra.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace braid::bench {
namespace {

constexpr size_t kLineBytes = 256;

#if BRAID_HAVE_MPI
void mpiCheck(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    fail(ErrorCode::kSystemError, "bench: {} failed: {}", what, std::string(text, len));
  }
}

std::optional<MPI_Datatype> mpiType(DataType type, bool reducing) {
  switch (type) {
    case DataType::kInt8:
      return MPI_INT8_T;
    case DataType::kUint8:
      return MPI_UINT8_T;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kUint32:
      return MPI_UINT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kUint64:
      return MPI_UINT64_T;
    case DataType::kFloat32:
      return MPI_FLOAT;
    case DataType::kFloat64:
      return MPI_DOUBLE;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      // MPI has no 16-bit float arithmetic; moving them as 16-bit words is fine.
      if (reducing) return std::nullopt;
      return MPI_UINT16_T;
  }
  return std::nullopt;
}

MPI_Op mpiOp(RedOp op) {
  switch (op) {
    case RedOp::kSum:
      return MPI_SUM;
    case RedOp::kAvg:
      return MPI_SUM;  // MPI has no average; the sum is its cost
    case RedOp::kProd:
      return MPI_PROD;
    case RedOp::kMax:
      return MPI_MAX;
    case RedOp::kMin:
      return MPI_MIN;
  }
  return MPI_SUM;
}

void runMpi(const CollInfo& coll, const Counts& c, MPI_Datatype type, MPI_Op op, int root,
            const void* send, void* recv) {
  int count;
  switch (coll.kind) {
    case Collective::kAllReduce:
      count = static_cast<int>(c.paramCount);
      mpiCheck(MPI_Allreduce(send, recv, count, type, op, MPI_COMM_WORLD), "MPI_Allreduce");
      break;
    case Collective::kReduceScatter:
      count = static_cast<int>(c.recvCount);
      mpiCheck(MPI_Reduce_scatter_block(send, recv, count, type, op, MPI_COMM_WORLD),
               "MPI_Reduce_scatter_block");
      break;
    case Collective::kAllGather:
      count = static_cast<int>(c.sendCount);
      mpiCheck(MPI_Allgather(send, count, type, recv, count, type, MPI_COMM_WORLD),
               "MPI_Allgather");
      break;
    case Collective::kBroadcast:
      count = static_cast<int>(c.paramCount);
      mpiCheck(MPI_Bcast(recv, count, type, root, MPI_COMM_WORLD), "MPI_Bcast");
      break;
    case Collective::kReduce:
      count = static_cast<int>(c.paramCount);
      mpiCheck(MPI_Reduce(send, recv, count, type, op, root, MPI_COMM_WORLD), "MPI_Reduce");
      break;
    case Collective::kAllToAll:
      count = static_cast<int>(c.paramCount);
      mpiCheck(MPI_Alltoall(send, count, type, recv, count, type, MPI_COMM_WORLD), "MPI_Alltoall");
      break;
    case Collective::kGather:
      count = static_cast<int>(c.sendCount);
      mpiCheck(MPI_Gather(send, count, type, recv, count, type, root, MPI_COMM_WORLD),
               "MPI_Gather");
      break;
    case Collective::kScatter:
      count = static_cast<int>(c.recvCount);
      mpiCheck(MPI_Scatter(send, count, type, recv, count, type, root, MPI_COMM_WORLD),
               "MPI_Scatter");
      break;
    default:
      fail(ErrorCode::kInvalidUsage, "bench: no MPI baseline for {}", coll.name);
  }
}
#endif

// The bench's own collectives (device lines, times, wrong counts) are all-reduces. A forced
// algorithm (--algo or BRAID_ALGO) may not run those, so then they get a communicator of their
// own, forced to ring (which runs all-reduce at any size).
bool forcedAlgorithm(const Options& options) {
  auto envAlgo = envString("BRAID_ALGO");
  return options.algorithm != Algorithm::kAuto || (envAlgo && *envAlgo != "auto");
}

/// The options of a rank's first communicator: ring when an algorithm is forced.
Options firstOptions(const Options& options) {
  Options first = options;
  if (forcedAlgorithm(options)) first.algorithm = Algorithm::kRing;
  return first;
}

int envRank(const char* name) {
  auto value = envInt(name);
  return value ? static_cast<int>(*value) : -1;
}

}  // namespace

bool launchedByMpirun() {
  return envString("OMPI_COMM_WORLD_RANK").has_value() || envString("PMIX_RANK").has_value() ||
         envString("PMI_RANK").has_value();
}

int rankFromEnvironment() {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    int rank = envRank(name);
    if (rank >= 0) return rank;
  }
  return 0;
}

int localRank() {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"}) {
    if (auto value = envInt(name)) return static_cast<int>(*value);
  }
  return 0;
}

std::unique_ptr<World> World::join(const Options& options, bool needMpi) {
  std::unique_ptr<World> world(new World());
  world->adopt(world->joinFirst(firstOptions(options), needMpi), options);
  return world;
}

std::unique_ptr<World> World::joinThread(const UniqueId& id, int rank, int size,
                                         const std::string& launcher, const Options& options) {
  std::unique_ptr<World> world(new World());
  world->launcher_ = launcher;
  world->adopt(std::make_unique<Communicator>(
                   Communicator::fromUniqueId(id, rank, size, firstOptions(options))),
               options);
  return world;
}

void World::adopt(std::unique_ptr<Communicator> first, const Options& options) {
  rank_ = first->rank();
  size_ = first->size();
  comm_ = std::move(first);
  if (!forcedAlgorithm(options)) return;
  // The one made with firstOptions() is the helper; the one under test comes from an id handed
  // out over it.
  helper_ = std::move(comm_);
  const UniqueId id = shareUniqueId();
  comm_ = std::make_unique<Communicator>(Communicator::fromUniqueId(id, rank_, size_, options));
}

UniqueId World::shareUniqueId() {
  UniqueId id;  // zero-filled; a sum hands rank 0's bytes to everyone
  if (rank_ == 0) id = Communicator::uniqueId();
  helper().allReduce(id.bytes.data(), id.bytes.data(), id.bytes.size(), DataType::kUint8,
                     RedOp::kSum);
  return id;
}

std::unique_ptr<Communicator> World::joinFirst(const Options& options, bool needMpi) {
  const bool underMpirun = launchedByMpirun() && !envString("RANK").has_value();
#if BRAID_HAVE_MPI
  if (underMpirun) {
    mpiCheck(MPI_Init(nullptr, nullptr), "MPI_Init");
    mpiActive_ = true;
    launcher_ = "mpirun";
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    // Byte 0 says whether rank 0 made the id, so the others never wait on a rank 0 that failed.
    std::array<char, sizeof(UniqueId::bytes) + 1> packet{};
    std::string failure;
    if (rank == 0) {
      try {
        UniqueId id = Communicator::uniqueId();
        std::memcpy(packet.data() + 1, id.bytes.data(), id.bytes.size());
        packet[0] = 1;
      } catch (const Error& e) {
        failure = e.what();
      }
    }
    mpiCheck(MPI_Bcast(packet.data(), static_cast<int>(packet.size()), MPI_BYTE, 0, MPI_COMM_WORLD),
             "MPI_Bcast of the unique id");
    if (packet[0] != 1) {
      fail(ErrorCode::kRemoteError, "rank {}: rank 0 could not make a unique id{}{}", rank,
           failure.empty() ? "" : ": ", failure);
    }
    UniqueId id;
    std::memcpy(id.bytes.data(), packet.data() + 1, id.bytes.size());
    return std::make_unique<Communicator>(Communicator::fromUniqueId(id, rank, size, options));
  }
#endif
  BRAID_ENFORCE(!needMpi, ErrorCode::kInvalidUsage,
                "--baseline mpi needs {}; launch with mpirun --allow-run-as-root --oversubscribe "
                "-np N ...",
                BRAID_HAVE_MPI ? "a launch by mpirun (OMPI_COMM_WORLD_RANK is unset)"
                               : "a build with MPI (this one has none)");
  BRAID_ENFORCE(!underMpirun, ErrorCode::kInvalidUsage,
                "launched by mpirun but this build has no MPI (configure with "
                "BRAID_WITH_MPI=ON and libopenmpi-dev); launch with braidrun instead");
  if (envString("RANK") || envString("WORLD_SIZE")) {
    launcher_ = envString("BRAID_SECRET") ? "braidrun" : "env";
    return std::make_unique<Communicator>(Communicator::fromEnvironment(options));
  }
  launcher_ = "single";
  UniqueId id = Communicator::uniqueId();
  return std::make_unique<Communicator>(Communicator::fromUniqueId(id, 0, 1, options));
}

World::~World() {
  comm_.reset();
  helper_.reset();
#if BRAID_HAVE_MPI
  if (mpiActive_ && finished_) MPI_Finalize();
#endif
}

void World::finish() { finished_ = true; }

double World::combineTime(double seconds, Average how) {
  if (how == Average::kRank0) return seconds;  // only rank 0 reports
#if BRAID_HAVE_MPI
  if (mpiActive_) {
    double out = 0;
    MPI_Op op = how == Average::kMin ? MPI_MIN : how == Average::kMax ? MPI_MAX : MPI_SUM;
    mpiCheck(MPI_Allreduce(&seconds, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD), "MPI_Allreduce");
    return how == Average::kMean ? out / size_ : out;
  }
#endif
  double out = 0;
  RedOp op = how == Average::kMin ? RedOp::kMin : how == Average::kMax ? RedOp::kMax : RedOp::kSum;
  helper().allReduce(&seconds, &out, 1, DataType::kFloat64, op);
  return how == Average::kMean ? out / size_ : out;
}

int64_t World::sumOverRanks(int64_t value) {
#if BRAID_HAVE_MPI
  if (mpiActive_) {
    int64_t out = 0;
    mpiCheck(MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    return out;
  }
#endif
  int64_t out = 0;
  helper().allReduce(&value, &out, 1, DataType::kInt64, RedOp::kSum);
  return out;
}

std::vector<std::string> World::allGatherLines(const std::string& line) {
  std::vector<char> mine(kLineBytes, '\0');
  std::memcpy(mine.data(), line.data(), std::min(line.size(), kLineBytes - 1));
  std::vector<char> all(kLineBytes * size_, '\0');
#if BRAID_HAVE_MPI
  if (mpiActive_) {
    mpiCheck(MPI_Allgather(mine.data(), kLineBytes, MPI_CHAR, all.data(), kLineBytes, MPI_CHAR,
                           MPI_COMM_WORLD),
             "MPI_Allgather");
  } else
#endif
  {
    // A gather as a sum over zero-filled slots (one collective kind for all the helpers).
    std::memcpy(all.data() + rank_ * kLineBytes, mine.data(), kLineBytes);
    helper().allReduce(all.data(), all.data(), all.size(), DataType::kUint8, RedOp::kSum);
  }
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.emplace_back(all.data() + r * kLineBytes);
  return out;
}

std::optional<double> World::timeMpi(const CollInfo& coll, const Counts& counts, DataType type,
                                     RedOp op, int root, const void* send, void* recv, int warmup,
                                     int iters, Average how) {
#if BRAID_HAVE_MPI
  BRAID_ENFORCE(mpiActive_, ErrorCode::kInvalidUsage, "rank {}: MPI baseline without MPI", rank_);
  auto mtype = mpiType(type, coll.hasOp);
  if (!mtype) return std::nullopt;
  MPI_Op mop = mpiOp(op);
  for (int i = 0; i < warmup; ++i) runMpi(coll, counts, *mtype, mop, root, send, recv);
  mpiCheck(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) runMpi(coll, counts, *mtype, mop, root, send, recv);
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return combineTime(elapsed.count() / iters, how);
#else
  fail(ErrorCode::kInvalidUsage, "rank {}: this build has no MPI for --baseline mpi", rank_);
#endif
}

}  // namespace braid::bench
