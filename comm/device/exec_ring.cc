#include "comm/device/exec_ring.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <new>

#include "common/error.h"

namespace braid::comm::device {
namespace {

namespace kc = braid::kernels::cuda;

template <typename T>
void storeRelease(T& word, T value) {
  std::atomic_ref<T>(word).store(value, std::memory_order_release);
}

RedOp asRun(RedOp op) { return op == RedOp::kAvg ? RedOp::kSum : op; }

}  // namespace

ExecRing::ExecRing(int rank, size_t launches) : rank_(rank) {
  void* mem = nullptr;
  cudaError_t err = cudaHostAlloc(&mem, sizeof(kc::ExecChannel), cudaHostAllocMapped);
  const char* what = "cudaHostAlloc(the executor's ring)";
  if (err == cudaSuccess) {
    host_ = new (mem) kc::ExecChannel();
    what = "cudaHostGetDevicePointer(the executor's ring)";
    err = cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), mem, 0);
  }
  if (err == cudaSuccess) {
    what = "cudaMalloc(the executor's claim words)";
    err = cudaMalloc(reinterpret_cast<void**>(&slots_), sizeof(kc::ExecSlotWords));
  }
  if (err == cudaSuccess) err = cudaMemset(slots_, 0, sizeof(kc::ExecSlotWords));
  if (err == cudaSuccess) {
    what = "cudaMalloc(the executor's exit counts)";
    err = cudaMalloc(reinterpret_cast<void**>(&exited_), launches * sizeof(uint32_t));
  }
  if (err == cudaSuccess) err = cudaMemset(exited_, 0, launches * sizeof(uint32_t));
  if (err != cudaSuccess) {
    if (exited_ != nullptr) cudaFree(exited_);
    if (slots_ != nullptr) cudaFree(slots_);
    if (host_ != nullptr) cudaFreeHost(host_);
    cudaGetLastError();
    fail(ErrorCode::kCudaError, "rank {}: device communicator: {} failed: {} ({})", rank, what,
         cudaGetErrorString(err), int(err));
  }
}

ExecRing::~ExecRing() {
  cudaFree(exited_);
  cudaFree(slots_);
  cudaFreeHost(host_);
  cudaGetLastError();
}

void ExecRing::beginOp(uint64_t ticket, DataType type, RedOp op) {
  ticket_ = ticket;
  type_ = type;
  op_ = op;
  storeRelease(host_->firstSeq, posted_);
  storeRelease(host_->owner, ticket);  // after firstSeq: the kernel reads them in this order
}

bool ExecRing::runs(DataType type, RedOp op) const {
  return type == DataType::kUint8 || (type == type_ && asRun(op) == asRun(op_));
}

bool ExecRing::slotFree(uint64_t seq) const {
  return seq < kc::kExecRing || isDone(seq - kc::kExecRing);
}

void ExecRing::post(kc::ExecCommand c, const void* const* srcs) {
  const uint64_t seq = posted_;
  kc::ExecCommand& slot = host_->cmd[seq % kc::kExecRing];
  // A sequence lock (executor.h): seal 0, the fields, then the seal that names this command.
  storeRelease(slot.seal, uint64_t(0));
  std::atomic_thread_fence(std::memory_order_seq_cst);
  c.ticket = ticket_;
  c.seq = seq;
  c.seal = 0;
  slot = c;
  if (c.kind == uint32_t(kc::ExecKind::kReduceMany)) {
    for (int k = 0; k < c.nsrc; ++k) host_->srcs[seq % kc::kExecRing][k] = srcs[k];
  }
  storeRelease(slot.seal, seq + 1);
  posted_ = seq + 1;
  storeRelease(host_->posted, posted_);
}

bool ExecRing::isDone(uint64_t seq) const {
  return std::atomic_ref<uint64_t>(host_->done[seq % kc::kExecRing])
             .load(std::memory_order_acquire) == seq + 1;
}

kc::ExecParams ExecRing::params(uint64_t ticket, DataType type, RedOp op, uint32_t* readyWord,
                                uint32_t* flag, size_t word, uint64_t maxIdleNanos) const {
  kc::ExecParams p;
  p.dtype = uint8_t(type);
  p.op = uint8_t(asRun(op));
  p.channel = device_;
  p.slots = slots_;
  p.exited = exited_ + word;
  p.ready = readyWord;
  p.flag = flag;
  p.ticket = ticket;
  p.maxIdleNanos = maxIdleNanos;
  return p;
}

}  // namespace braid::comm::device
