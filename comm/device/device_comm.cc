// DeviceCommunicator: the communicator core every communicator has (comm/detail/state.h: checks,
// numbering, the op queue and its progress thread, the engine, the broken state) over a CUDA IPC
// endpoint, with the device medium (device_medium.h: callers' streams wait for tickets) and the
// CUDA piece engine (cuda_pieces.h). Design: README.md.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <optional>
#include <random>

#include "braid/braid.hpp"
#include "comm/detail/state.h"
#include "comm/device/cuda_pieces.h"
#include "comm/device/device_medium.h"
#include "comm/device/kernel_pieces.h"
#include "comm/device/gather_kv.h"
#include "common/env.h"
#include "common/log.h"
#include "transport/transport.h"

namespace braid {

using comm::device::DeviceMedium;

namespace {

void checkCuda(cudaError_t err, int rank, const char* call) {
  if (err != cudaSuccess) {
    fail(ErrorCode::kCudaError, "rank {}: device communicator: {} failed: {} ({})", rank, call,
         cudaGetErrorString(err), int(err));
  }
}

/// Makes `device` current for a scope and restores the caller's device after (API calls must not
/// change the calling thread's current device).
class DeviceGuard {
 public:
  DeviceGuard(int device, int rank) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ != device) checkCuda(cudaSetDevice(device), rank, "cudaSetDevice");
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

constexpr size_t kDefaultSlotBytes = 1 << 20;
constexpr int kDefaultChannels = 2;
constexpr int kDefaultSlots = 4;

/// The host path's options (comm/options.cc: the same limits and BRAID_* variables) with the
/// device's defaults: 1 MiB slots (rounded up to 256 B, the kernels' vectors), 2 channels, 4
/// slots per peer and channel (device memory), outputs never streamed.
ResolvedOptions resolveDeviceOptions(const Options& options) {
  ResolvedOptions o = resolveOptions(options);
  if (!o.chunkSet) o.slotBytes = kDefaultSlotBytes;
  o.slotBytes = (o.slotBytes + 255) / 256 * 256;
  if (!o.channelsSet) o.channels = kDefaultChannels;
  if (!envInt("BRAID_SLOTS").has_value()) o.slots = kDefaultSlots;
  o.streamBytes = SIZE_MAX;
  return o;
}

}  // namespace

struct DeviceCommState {
  int device = 0;
  std::shared_ptr<CommState> core;
  DeviceMedium* medium = nullptr;  // owned by core

  void enqueue(const comm::OpDesc& d, CudaStream stream);
  /// Waits (bounded) for what is enqueued, then frees everything on the communicator's device.
  void shutdown();
};

void DeviceCommState::enqueue(const comm::OpDesc& desc, CudaStream userStream) {
  core->submitTicketed(desc, [&] {
    DeviceGuard guard(device, core->rank);
    return medium->admit(userStream.handle, desc.dtype, desc.op);
  });
}

void DeviceCommState::shutdown() {
  if (!core) return;
  try {
    medium->waitAllFinished();
  } catch (const Error& e) {
    BRAID_WARN("{}; destroying the device communicator anyway", e.what());
  }
  DeviceGuard guard(device, core->rank);
  core.reset();
}

DeviceCommunicator DeviceCommunicator::create(Communicator& host, int device,
                                              const Options& options) {
  const int rank = host.rank(), size = host.size();
  const ResolvedOptions resolved = resolveDeviceOptions(options);
  const std::vector<int> nodeOf = host.nodeOf();
  for (int r = 0; r < size; ++r) {
    BRAID_ENFORCE(nodeOf[r] == nodeOf[0], ErrorCode::kInvalidUsage,
                  "rank {}: device communicator: rank {} is on another host than rank 0 (CUDA "
                  "IPC reaches the ranks of one host)",
                  rank, r);
  }
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || device < 0 || device >= count) {
    cudaGetLastError();
    const std::string why =
        err != cudaSuccess ? cudaGetErrorString(err) : fmt::format("{} devices", count);
    fail(ErrorCode::kInvalidUsage, "rank {}: device communicator: CUDA device {} unavailable ({})",
         rank, device, why);
  }
  DeviceGuard guard(device, rank);

  // A job id for the control segment's name, from rank 0.
  std::array<char, 32> job{};
  if (rank == 0) {
    std::random_device rd;
    const std::string id = fmt::format("{:08x}{:08x}{:08x}", rd(), rd(), getpid());
    std::copy(id.begin(), id.end(), job.begin());
  }
  host.broadcast(job.data(), job.data(), job.size(), DataType::kUint8, 0);

  auto st = std::make_shared<DeviceCommState>();
  st->device = device;
  auto medium = std::make_unique<DeviceMedium>(rank, device, size, resolved.timeoutSeconds);
  st->medium = medium.get();
  st->core = CommState::make(rank, size, resolved, std::move(medium));
  CommState& core = *st->core;
  core.nodeOf = nodeOf;  // no cluster model: its costs are host memory's (the tuner's rules decide)

  transport::EndpointConfig config;
  config.rank = rank;
  config.size = size;
  std::vector<std::string> hosts;  // by node: equal for ranks on one host
  for (int node : nodeOf) hosts.push_back(fmt::format("node {}", node));
  config.peerKinds = transport::chooseKinds(rank, hosts, "", /*deviceMemory=*/true);
  config.channels = resolved.channels;
  config.slots = resolved.slots;
  config.slotBytes = resolved.slotBytes;
  config.jobId = std::string(job.data(), strnlen(job.data(), job.size()));
  config.timeoutSeconds = resolved.timeoutSeconds;
  config.device = device;
  comm::device::GatherKeyValue kv(host);
  // The launching engine (the default), or with BRAID_CUDA_ENGINE=executor the executor kernel's
  // (the caller launches one kernel per op, the progress thread only posts; device_medium.h).
  std::unique_ptr<comm::device::DevicePieces> pieces;
  if (st->medium->executor()) {
    pieces = std::make_unique<comm::device::KernelPieces>(
        rank, st->medium->ring(), st->medium->executorBlocks(), resolved.timeoutSeconds);
  } else {
    pieces = std::make_unique<comm::device::CudaPieces>(rank, st->medium->stream(),
                                                        resolved.timeoutSeconds);
  }
  comm::device::DevicePieces* rawPieces = pieces.get();
  core.start(transport::connect(config, kv), std::move(pieces),
             /*oversubscribed=*/true);
  rawPieces->attach(&core.executor->runner());
  return DeviceCommunicator(st);
}

DeviceCommunicator::DeviceCommunicator(std::shared_ptr<DeviceCommState> state)
    : state_(std::move(state)) {}
DeviceCommunicator::DeviceCommunicator(DeviceCommunicator&&) noexcept = default;
DeviceCommunicator& DeviceCommunicator::operator=(DeviceCommunicator&&) noexcept = default;

DeviceCommunicator::~DeviceCommunicator() {
  if (state_) state_->shutdown();
}

int DeviceCommunicator::rank() const { return state_->core->rank; }
int DeviceCommunicator::size() const { return state_->core->size; }
int DeviceCommunicator::device() const { return state_->device; }
void DeviceCommunicator::allReduce(const void* send, void* recv, size_t count, DataType type,
                                   RedOp op, CudaStream stream) {
  state_->enqueue({Collective::kAllReduce, send, recv, count, type, op, -1, 0}, stream);
}
void DeviceCommunicator::reduceScatter(const void* send, void* recv, size_t recvCount,
                                       DataType type, RedOp op, CudaStream stream) {
  state_->enqueue({Collective::kReduceScatter, send, recv, recvCount, type, op, -1, 0}, stream);
}
void DeviceCommunicator::allGather(const void* send, void* recv, size_t sendCount, DataType type,
                                   CudaStream stream) {
  state_->enqueue({Collective::kAllGather, send, recv, sendCount, type, RedOp::kSum, -1, 0},
                  stream);
}
void DeviceCommunicator::broadcast(const void* send, void* recv, size_t count, DataType type,
                                   int root, CudaStream stream) {
  state_->enqueue({Collective::kBroadcast, send, recv, count, type, RedOp::kSum, root, 0}, stream);
}
void DeviceCommunicator::reduce(const void* send, void* recv, size_t count, DataType type, RedOp op,
                                int root, CudaStream stream) {
  state_->enqueue({Collective::kReduce, send, recv, count, type, op, root, 0}, stream);
}
void DeviceCommunicator::send(const void* buf, size_t count, DataType type, int peer,
                              CudaStream stream) {
  state_->enqueue({Collective::kSend, buf, nullptr, count, type, RedOp::kSum, peer, 0}, stream);
}
void DeviceCommunicator::recv(void* buf, size_t count, DataType type, int peer, CudaStream stream) {
  state_->enqueue({Collective::kRecv, nullptr, buf, count, type, RedOp::kSum, peer, 0}, stream);
}
void DeviceCommunicator::allToAll(const void* send, void* recv, size_t count, DataType type,
                                  CudaStream stream) {
  state_->enqueue({Collective::kAllToAll, send, recv, count, type, RedOp::kSum, -1, 0}, stream);
}
void DeviceCommunicator::allToAllv(const void* send, const size_t* sendCounts,
                                   const size_t* sendDispls, void* recv, const size_t* recvCounts,
                                   const size_t* recvDispls, DataType type, CudaStream stream) {
  state_->enqueue(comm::allToAllvOp(send, sendCounts, sendDispls, recv, recvCounts, recvDispls,
                                    type, rank(), size()),
                  stream);
}
void DeviceCommunicator::gather(const void* send, void* recv, size_t sendCount, DataType type,
                                int root, CudaStream stream) {
  state_->enqueue({Collective::kGather, send, recv, sendCount, type, RedOp::kSum, root, 0},
                  stream);
}
void DeviceCommunicator::scatter(const void* send, void* recv, size_t recvCount, DataType type,
                                 int root, CudaStream stream) {
  state_->enqueue({Collective::kScatter, send, recv, recvCount, type, RedOp::kSum, root, 0},
                  stream);
}

ErrorCode DeviceCommunicator::asyncError() const {
  std::lock_guard<std::mutex> lock(state_->core->errorMutex);
  const auto& broken = state_->core->brokenLocked();
  return broken ? broken->code() : ErrorCode::kOk;
}

void DeviceCommunicator::checkAsyncError() const {
  std::lock_guard<std::mutex> lock(state_->core->errorMutex);
  if (state_->core->brokenLocked()) throw *state_->core->broken;
}

void DeviceCommunicator::synchronize() {
  state_->medium->waitAllFinished();
  checkAsyncError();
}

void DeviceCommunicator::abort() {
  CommState& c = *state_->core;
  {
    std::lock_guard<std::mutex> lock(c.errorMutex);
    if (!c.broken) {
      c.broken = Error(ErrorCode::kAborted,
                       fmt::format("rank {}: the device communicator was aborted", c.rank));
      c.brokenSeen.store(true, std::memory_order_release);
    }
  }
  c.abort(fmt::format("rank {} aborted", c.rank));
}

}  // namespace braid
