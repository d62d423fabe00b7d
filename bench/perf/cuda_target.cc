// The CUDA target (--device cuda): buffers on GPU LOCAL_RANK % #devices, ops through a
// DeviceCommunicator on one stream, timed as nccl-tests does (enqueue the iterations, then
// synchronize the stream). Host mirrors of every buffer carry fills and checks. With -t every
// thread rank has its own: its own DeviceCommunicator and non-blocking stream on the process's
// GPU (one context). Ranks that are threads must not cudaFree while a peer's collective may be in
// flight (a deadlock on the context lock: tests/cuda/rank_threads.h), so the driver destroys a
// target only after the run's last barrier of all ranks, every op of every rank synchronized.
#include <cuda_runtime_api.h>

#include <chrono>
#include <vector>

#include "bench/perf/target.h"
#include "common/env.h"
#include "common/error.h"

namespace braid::bench {
namespace {

void check(cudaError_t e, int rank, const char* what) {
  if (e != cudaSuccess) {
    fail(ErrorCode::kCudaError, "rank {}: --device cuda: {}: {}", rank, what,
         cudaGetErrorString(e));
  }
}

class CudaTarget final : public Target {
 public:
  CudaTarget(World& world, const CollInfo& info, const Options& options)
      : rank_(world.rank()), info_(info) {
    int devices = 0;
    check(cudaGetDeviceCount(&devices), rank_, "cudaGetDeviceCount");
    BRAID_ENFORCE(devices > 0, ErrorCode::kCudaError, "rank {}: --device cuda: no CUDA device",
                  rank_);
    device_ = localRank() % devices;
    check(cudaSetDevice(device_), rank_, "cudaSetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device_), rank_, "cudaGetDeviceProperties");
    label_ = fmt::format("[0x{:02x}] {}", prop.pciBusID, prop.name);
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), rank_, "cudaStreamCreate");
    comm_ = std::make_unique<DeviceCommunicator>(
        DeviceCommunicator::create(world.comm(), device_, options));
  }
  ~CudaTarget() override {
    try {
      if (comm_) comm_->synchronize();
    } catch (const Error&) {
      // The run already reported its error; freeing must go on.
    }
    comm_.reset();
    for (auto& b : buffers_) cudaFree(b.device);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  void* allocate(size_t bytes) override {
    Buffer b;
    b.bytes = std::max<size_t>(bytes, 1);
    check(cudaMalloc(&b.device, b.bytes), rank_, "cudaMalloc");
    check(cudaMemset(b.device, 0, b.bytes), rank_, "cudaMemset");
    b.host.assign(b.bytes, 0);
    buffers_.push_back(std::move(b));
    return buffers_.back().device;
  }

  void* hostView(void* p) override {
    Buffer& b = find(p);
    return b.host.data() + offset(b, p);
  }
  void upload(void* p, size_t bytes) override {
    check(cudaMemcpyAsync(p, hostView(p), bytes, cudaMemcpyHostToDevice, stream_), rank_,
          "upload");
    check(cudaStreamSynchronize(stream_), rank_, "upload");
  }
  void download(void* p, size_t bytes) override {
    check(cudaMemcpyAsync(hostView(p), p, bytes, cudaMemcpyDeviceToHost, stream_), rank_,
          "download");
    check(cudaStreamSynchronize(stream_), rank_, "download");
  }

  void runOnce(const OpArgs& a) override {
    enqueue(a);
    finish("run");
  }

  double timeOps(const OpArgs& a, int iters) override {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) enqueue(a);
    finish("timed runs");
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    return elapsed.count() / iters;
  }

  std::string describe() const override { return fmt::format("cuda device {}", device_); }
  int deviceNumber() const override { return device_; }
  std::string deviceLabel() const override { return label_; }

 private:
  struct Buffer {
    void* device = nullptr;
    size_t bytes = 0;
    std::vector<char> host;
  };

  Buffer& find(void* p) {
    for (Buffer& b : buffers_) {
      if (p >= b.device && static_cast<char*>(p) <= static_cast<char*>(b.device) + b.bytes)
        return b;
    }
    fail(ErrorCode::kInternal, "rank {}: --device cuda: {} is in no bench buffer", rank_, p);
  }
  static size_t offset(const Buffer& b, void* p) {
    return static_cast<size_t>(static_cast<char*>(p) - static_cast<char*>(b.device));
  }

  void enqueue(const OpArgs& a) {
    DeviceCommunicator& c = *comm_;
    switch (info_.kind) {
      case Collective::kAllReduce:
        return c.allReduce(a.send, a.recv, a.count, a.type, a.op, CudaStream{stream_});
      case Collective::kReduceScatter:
        return c.reduceScatter(a.send, a.recv, a.count, a.type, a.op, CudaStream{stream_});
      case Collective::kAllGather:
        return c.allGather(a.send, a.recv, a.count, a.type, CudaStream{stream_});
      case Collective::kBroadcast:
        return c.broadcast(a.send, a.recv, a.count, a.type, a.root, CudaStream{stream_});
      case Collective::kReduce:
        return c.reduce(a.send, a.recv, a.count, a.type, a.op, a.root, CudaStream{stream_});
      case Collective::kAllToAll:
        return c.allToAll(a.send, a.recv, a.count, a.type, CudaStream{stream_});
      case Collective::kGather:
        return c.gather(a.send, a.recv, a.count, a.type, a.root, CudaStream{stream_});
      case Collective::kScatter:
        return c.scatter(a.send, a.recv, a.count, a.type, a.root, CudaStream{stream_});
      default:
        fail(ErrorCode::kInvalidUsage, "rank {}: --device cuda: {} has no device path", rank_,
             collectiveName(info_.kind));
    }
  }

  void finish(const char* what) {
    check(cudaStreamSynchronize(stream_), rank_, what);
    comm_->checkAsyncError();
  }

  const int rank_;
  const CollInfo& info_;
  int device_ = 0;
  std::string label_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<DeviceCommunicator> comm_;
  std::vector<Buffer> buffers_;
};

}  // namespace

std::unique_ptr<Target> makeCudaTarget(World& world, const CollInfo& info,
                                       const Options& options) {
  return std::make_unique<CudaTarget>(world, info, options);
}

}  // namespace braid::bench
