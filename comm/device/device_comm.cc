// DeviceCommunicator: argument checks and numbering on the caller's thread, an op queue, and a
// progress thread that runs each op with the DeviceExecutor on an internal stream, then raises
// the completion counter the callers' streams wait for (completion.h). Design: README.md.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "braid/braid.hpp"
#include "comm/device/completion.h"
#include "comm/device/device_executor.h"
#include "comm/device/gather_kv.h"
#include "comm/device/op.h"
#include "common/env.h"
#include "common/log.h"
#include "transport/cuda_ipc/cuda_ipc.h"

namespace braid {

using comm::device::DeviceOp;

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
constexpr int kSlots = 4;

}  // namespace

struct DeviceCommState {
  int rank = 0;
  int size = 1;
  int device = 0;
  double timeoutSeconds = 60;
  size_t slotBytes = kDefaultSlotBytes;
  comm::TunerConfig tuner;
  std::unique_ptr<transport::Endpoint> endpoint;
  cudaStream_t stream = nullptr;
  std::unique_ptr<comm::device::CompletionFlag> flag;
  std::unique_ptr<comm::device::DeviceExecutor> executor;
  std::atomic<bool> aborted{false};

  struct Queued {
    DeviceOp op;
    std::shared_ptr<comm::device::Plan> plan;
    cudaEvent_t ready = nullptr;
    uint32_t target = 0;
  };
  mutable std::mutex mutex;
  std::condition_variable workCv, doneCv;
  std::deque<Queued> queue;
  uint32_t issued = 0, completed = 0;
  comm::OpNumbering numbering;
  bool stopping = false;
  std::optional<Error> broken;
  std::thread worker;

  void enqueue(DeviceOp op, CudaStream stream);
  void workerLoop();
  void runOne(Queued& q);
  void setBroken(const Error& e) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!broken) broken = e;
  }
  /// Turns a stream wait kernel that gave up (its bounded spin ran out) into the communicator's
  /// error: the stream then ran on without the collective. Caller holds `mutex`.
  void noteWaitGaveUpLocked() {
    if (!broken && flag && flag->waitGaveUp()) {
      broken = Error(ErrorCode::kTimeout,
                     fmt::format("rank {}: a caller's stream stopped waiting for a device "
                                 "collective after {} s (the progress side made no progress; "
                                 "BRAID_TIMEOUT)",
                                 rank, 2 * timeoutSeconds + 10));
    }
  }
  void shutdown();
};

void DeviceCommState::enqueue(DeviceOp d, CudaStream userStream) {
  comm::device::validateOp(d, rank, size, device, comm::device::cudaPointerClassifier());
  std::unique_lock<std::mutex> lock(mutex);
  noteWaitGaveUpLocked();
  if (broken) throw *broken;
  if (aborted.load()) {
    fail(ErrorCode::kAborted, "rank {}: {}: the device communicator was aborted", rank,
         collectiveName(d.coll));
  }
  // Numbered like the host path; count 0 moves nothing.
  uint64_t* counter = numbering.number(d);
  if (d.count == 0) {
    ++*counter;
    return;
  }
  Queued q;
  q.op = d;
  // Planned here so that a schedule that cannot run this collective (a forced algorithm) is a
  // usage error at the call, numbering nothing.
  q.plan = std::make_shared<comm::device::Plan>(
      comm::device::planOp(d, rank, size, tuner, slotBytes, timeoutSeconds));
  ++*counter;
  auto s = static_cast<cudaStream_t>(userStream.handle);
  DeviceGuard guard(device, rank);
  checkCuda(cudaEventCreateWithFlags(&q.ready, cudaEventDisableTiming), rank, "cudaEventCreate");
  cudaError_t err = cudaEventRecord(q.ready, s);
  if (err != cudaSuccess) {
    cudaEventDestroy(q.ready);
    checkCuda(err, rank, "cudaEventRecord on the caller's stream");
  }
  q.target = ++issued;
  queue.push_back(q);
  workCv.notify_one();
  try {
    // Generous bound for a wait kernel: the progress side publishes within its own timeout.
    flag->enqueueWait(s, q.target, 2 * timeoutSeconds + 10);
  } catch (const Error& e) {
    if (!broken) broken = e;
    throw;
  }
}

void DeviceCommState::runOne(Queued& q) {
  // The caller's preceding work is not ours to bound; wait for it while watching abort().
  for (int round = 0;; ++round) {
    cudaError_t err = cudaEventQuery(q.ready);
    if (err == cudaSuccess) break;
    if (err != cudaErrorNotReady) {
      checkCuda(err, rank, "waiting for the caller's stream");
    }
    if (aborted.load()) {
      fail(ErrorCode::kAborted, "rank {}: {}: aborted while waiting for the caller's stream", rank,
           collectiveName(q.op.coll));
    }
    if (round > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  executor->run(q.plan->program, q.plan->args);
}

void DeviceCommState::workerLoop() {
  cudaSetDevice(device);
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    workCv.wait(lock, [&] { return stopping || !queue.empty(); });
    if (queue.empty()) return;  // stopping with nothing left
    Queued q = queue.front();
    queue.pop_front();
    const bool skip = broken.has_value();
    lock.unlock();
    if (!skip) {
      try {
        runOne(q);
      } catch (const Error& e) {
        setBroken(e);
        endpoint->signalAbort(comm::encodeAbortReason(e.code(), e.what()));
      } catch (const std::exception& e) {
        Error err(ErrorCode::kInternal,
                  fmt::format("rank {}: {}: {}", rank, collectiveName(q.op.coll), e.what()));
        setBroken(err);
        endpoint->signalAbort(comm::encodeAbortReason(err.code(), err.what()));
      }
      cudaStreamSynchronize(stream);  // nothing of this op may run after the release below
    }
    cudaEventDestroy(q.ready);
    flag->publish(q.target);
    lock.lock();
    completed = q.target;
    doneCv.notify_all();
  }
}

void DeviceCommState::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  workCv.notify_all();
  if (worker.joinable()) worker.join();
  executor.reset();
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  cudaSetDevice(device);
  if (stream != nullptr) {
    cudaStreamDestroy(stream);
    stream = nullptr;
  }
  flag.reset();
  endpoint.reset();
  if (previous >= 0) cudaSetDevice(previous);
  cudaGetLastError();
}

DeviceCommunicator DeviceCommunicator::create(Communicator& host, int device,
                                              const Options& options) {
  auto st = std::make_shared<DeviceCommState>();
  st->rank = host.rank();
  st->size = host.size();
  st->device = device;
  st->timeoutSeconds =
      options.timeoutSeconds > 0 ? options.timeoutSeconds : defaultTimeoutSeconds();
  size_t slot = options.chunkBytes;
  if (slot == 0) slot = envBytes("BRAID_CHUNK").value_or(kDefaultSlotBytes);
  BRAID_ENFORCE(slot >= 256 && slot <= (size_t(1) << 30), ErrorCode::kInvalidUsage,
                "rank {}: device communicator: chunk of {} bytes outside [256 B, 1 GiB]", st->rank,
                slot);
  st->slotBytes = (slot + 255) / 256 * 256;  // every dtype, 16-byte vectors
  int channels =
      options.channels > 0 ? options.channels : int(envInt("BRAID_CHANNELS", kDefaultChannels));
  BRAID_ENFORCE(channels >= 1 && channels <= 16, ErrorCode::kInvalidUsage,
                "rank {}: device communicator: {} channels outside 1..16", st->rank, channels);
  Algorithm algo = options.algorithm;
  if (algo == Algorithm::kAuto) {
    if (auto name = envString("BRAID_ALGO")) {
      BRAID_ENFORCE(parseAlgorithm(*name, &algo), ErrorCode::kInvalidUsage,
                    "BRAID_ALGO='{}' is not an algorithm", *name);
    }
  }
  st->tuner.nranks = st->size;
  st->tuner.slotBytes = st->slotBytes;
  st->tuner.slots = kSlots;
  st->tuner.channels = channels;
  st->tuner.forced = algo;
  st->numbering = comm::OpNumbering(st->size);

  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || device < 0 || device >= count) {
    cudaGetLastError();
    const std::string why =
        err != cudaSuccess ? cudaGetErrorString(err) : fmt::format("{} devices", count);
    fail(ErrorCode::kInvalidUsage, "rank {}: device communicator: CUDA device {} unavailable ({})",
         st->rank, device, why);
  }
  DeviceGuard guard(device, st->rank);

  // A job id for the control segment's name, from rank 0.
  std::array<char, 32> job{};
  if (st->rank == 0) {
    std::random_device rd;
    const std::string id = fmt::format("{:08x}{:08x}{:08x}", rd(), rd(), getpid());
    std::copy(id.begin(), id.end(), job.begin());
  }
  host.broadcast(job.data(), job.data(), job.size(), DataType::kUint8, 0);

  transport::EndpointConfig config;
  config.rank = st->rank;
  config.size = st->size;
  config.peerKinds.assign(st->size, transport::cuda_ipc::kKind);
  config.peerKinds[st->rank] = transport::Kind::kSelf;
  config.channels = channels;
  config.slots = kSlots;
  config.slotBytes = st->slotBytes;
  config.jobId = std::string(job.data(), strnlen(job.data(), job.size()));
  config.timeoutSeconds = st->timeoutSeconds;
  comm::device::GatherKeyValue kv(host);
  st->endpoint = transport::cuda_ipc::connect(config, device, kv);

  try {
    checkCuda(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking), st->rank,
              "cudaStreamCreate");
    st->flag = std::make_unique<comm::device::CompletionFlag>(st->rank);
    st->executor =
        std::make_unique<comm::device::DeviceExecutor>(*st->endpoint, st->aborted, st->stream);
    st->worker = std::thread([raw = st.get()] { raw->workerLoop(); });
  } catch (...) {
    st->shutdown();
    throw;
  }
  return DeviceCommunicator(st);
}

DeviceCommunicator::DeviceCommunicator(std::shared_ptr<DeviceCommState> state)
    : state_(std::move(state)) {}
DeviceCommunicator::DeviceCommunicator(DeviceCommunicator&&) noexcept = default;
DeviceCommunicator& DeviceCommunicator::operator=(DeviceCommunicator&&) noexcept = default;

DeviceCommunicator::~DeviceCommunicator() {
  if (state_) state_->shutdown();
}

int DeviceCommunicator::rank() const { return state_->rank; }
int DeviceCommunicator::size() const { return state_->size; }
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

ErrorCode DeviceCommunicator::asyncError() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->noteWaitGaveUpLocked();
  return state_->broken ? state_->broken->code() : ErrorCode::kOk;
}

void DeviceCommunicator::checkAsyncError() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->noteWaitGaveUpLocked();
  if (state_->broken) throw *state_->broken;
}

void DeviceCommunicator::synchronize() {
  DeviceCommState& s = *state_;
  std::unique_lock<std::mutex> lock(s.mutex);
  // Bounded by the timeout measured from the last op that finished.
  uint32_t seen = s.completed;
  while (s.completed != s.issued) {
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(s.timeoutSeconds));
    s.doneCv.wait_until(lock, until, [&] { return s.completed != seen; });
    if (s.completed == seen) {
      fail(ErrorCode::kTimeout,
           "rank {}: device communicator: {} collectives still running after {} s without "
           "progress (BRAID_TIMEOUT)",
           s.rank, s.issued - s.completed, s.timeoutSeconds);
    }
    seen = s.completed;
  }
  s.noteWaitGaveUpLocked();
  if (s.broken) throw *s.broken;
}

void DeviceCommunicator::abort() {
  DeviceCommState& s = *state_;
  if (s.aborted.exchange(true)) return;
  s.setBroken(Error(ErrorCode::kAborted,
                    fmt::format("rank {}: the device communicator was aborted", s.rank)));
  if (s.endpoint)
    s.endpoint->signalAbort(
        comm::encodeAbortReason(ErrorCode::kAborted, fmt::format("rank {} aborted", s.rank)));
}

}  // namespace braid
