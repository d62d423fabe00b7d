#include "cuda_path.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <string>

#include "staging.h"

namespace braid::pytorch {
namespace {

size_t count(const at::Tensor& tensor) { return static_cast<size_t>(tensor.numel()); }

// A contiguous tensor braid reads and writes in place of `tensor` (itself, or a copy made on the
// current stream), and the copy back after the op (on the same stream: ordered after it).
at::Tensor contiguousOf(const at::Tensor& tensor) {
  return tensor.is_contiguous() ? tensor : tensor.contiguous();
}
void copyBack(const at::Tensor& tensor, const at::Tensor& buffer) {
  if (!buffer.is_same(tensor)) tensor.copy_(buffer);
}
// Copies `flat`'s pieces into the tensors of `list` (laid out as flatCat lays them).
void copyInto(const std::vector<at::Tensor>& list, const at::Tensor& flat) {
  const std::vector<at::Tensor> views = viewsLike(flat, list);
  for (size_t i = 0; i < list.size(); ++i) list[i].copy_(views[i]);
}

void checkCuda(cudaError_t err, const char* opName, const char* call) {
  TORCH_CHECK(err == cudaSuccess, "braid ", opName, ": ", call, " failed: ",
              cudaGetErrorString(err));
}

/// The Work of one op on CUDA tensors (see cuda_path.h).
class CudaWork final : public ::c10d::Work {
 public:
  CudaWork(int rank, ::c10d::OpType type, std::string opName, std::vector<at::Tensor> outputs,
           std::shared_ptr<DeviceCommunicator> comm, c10::cuda::CUDAStream stream)
      : ::c10d::Work(rank, type),
        opName_(std::move(opName)),
        outputs_(std::move(outputs)),
        comm_(std::move(comm)),
        stream_(stream) {
    checkCuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), opName_.c_str(),
              "cudaEventCreate");
    const cudaError_t err = cudaEventRecord(done_, stream_.stream());
    if (err != cudaSuccess) cudaEventDestroy(done_);
    checkCuda(err, opName_.c_str(), "cudaEventRecord on the op's stream");
  }
  ~CudaWork() override { cudaEventDestroy(done_); }

  bool isCompleted() override {
    const cudaError_t state = cudaEventQuery(done_);
    if (state == cudaErrorNotReady) return false;
    checkCuda(state, opName_.c_str(), "cudaEventQuery");
    raiseIfFailed();
    return true;
  }

  bool wait(std::chrono::milliseconds /*timeout*/) override {
    // As ProcessGroupNCCL: the caller's current stream waits; the host does not.
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(stream_.device_index());
    checkCuda(cudaStreamWaitEvent(current.stream(), done_, 0), opName_.c_str(),
              "cudaStreamWaitEvent");
    raiseIfFailed();
    return true;
  }

  std::vector<at::Tensor> result() override { return outputs_; }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!future_) {
      future_ = c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()),
          std::vector<c10::Device>{stream_.device()});
      // Completed now, with events on the op's stream: whoever uses the value waits for them.
      c10::cuda::CUDAStreamGuard guard(stream_);
      future_->markCompleted(c10::IValue(outputs_));
    }
    return future_;
  }

 private:
  void raiseIfFailed() const {
    try {
      comm_->checkAsyncError();
    } catch (const Error& e) {
      TORCH_CHECK(false, "braid ", opName_, " failed: ", e.what());
    }
  }

  std::string opName_;
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<DeviceCommunicator> comm_;
  c10::cuda::CUDAStream stream_;
  cudaEvent_t done_ = nullptr;
  std::mutex mutex_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace

CudaPath::CudaPath(Communicator& host, int device, double timeoutSeconds) : device_(device) {
  Options options;
  options.timeoutSeconds = timeoutSeconds;
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  try {
    comm_ = std::make_shared<DeviceCommunicator>(DeviceCommunicator::create(host, device, options));
  } catch (const Error& e) {
    TORCH_CHECK(false, "braid: setting up CUDA collectives on cuda:", device, " failed: ",
                e.what());
  }
}

CudaPath::~CudaPath() {
  try {
    if (comm_) comm_->synchronize();
  } catch (const Error&) {
    // Already reported through the ops' Works; destruction goes on.
  }
}

c10::intrusive_ptr<::c10d::Work> CudaPath::run(
    int rank, ::c10d::OpType type, const char* opName, std::vector<at::Tensor> outputs,
    const std::function<void(DeviceCommunicator&, CudaStream)>& body) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device_);
  try {
    body(*comm_, CudaStream{stream.stream()});
  } catch (const Error& e) {
    TORCH_CHECK(false, "braid ", opName, " failed: ", e.what());
  }
  return c10::make_intrusive<CudaWork>(rank, type, opName, std::move(outputs), comm_, stream);
}

CudaPath::WorkPtr CudaPath::inPlace(
    int rank, ::c10d::OpType type, const char* opName, const at::Tensor& tensor,
    const std::function<void(DeviceCommunicator&, void*, size_t, CudaStream)>& op) {
  return run(rank, type, opName, {tensor}, [&](DeviceCommunicator& dc, CudaStream s) {
    at::Tensor buf = contiguousOf(tensor);
    op(dc, buf.data_ptr(), count(buf), s);
    copyBack(tensor, buf);
  });
}

CudaPath::WorkPtr CudaPath::allReduce(int rank, const at::Tensor& tensor, DataType type,
                                      RedOp op) {
  return inPlace(rank, ::c10d::OpType::ALLREDUCE, "allreduce", tensor,
                 [&](DeviceCommunicator& dc, void* p, size_t n, CudaStream s) {
                   dc.allReduce(p, p, n, type, op, s);
                 });
}

CudaPath::WorkPtr CudaPath::broadcast(int rank, const at::Tensor& tensor, DataType type,
                                      int root) {
  return inPlace(rank, ::c10d::OpType::BROADCAST, "broadcast", tensor,
                 [&](DeviceCommunicator& dc, void* p, size_t n, CudaStream s) {
                   dc.broadcast(p, p, n, type, root, s);
                 });
}

CudaPath::WorkPtr CudaPath::reduce(int rank, const at::Tensor& tensor, DataType type, RedOp op,
                                   int root) {
  return inPlace(rank, ::c10d::OpType::REDUCE, "reduce", tensor,
                 [&](DeviceCommunicator& dc, void* p, size_t n, CudaStream s) {
                   dc.reduce(p, p, n, type, op, root, s);
                 });
}

CudaPath::WorkPtr CudaPath::allReduceCoalesced(int rank, const std::vector<Tensors>& groups,
                                               const std::vector<DataType>& types, RedOp op,
                                               const Tensors& outputs) {
  return run(rank, ::c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", outputs,
             [&](DeviceCommunicator& dc, CudaStream s) {
               for (size_t g = 0; g < groups.size(); ++g) {
                 at::Tensor flat = flatCat(groups[g]);
                 dc.allReduce(flat.data_ptr(), flat.data_ptr(), count(flat), types[g], op, s);
                 copyInto(groups[g], flat);
               }
             });
}

CudaPath::WorkPtr CudaPath::allGather(int rank, const Tensors& list, const at::Tensor& input,
                                      DataType type, int size) {
  return run(rank, ::c10d::OpType::ALLGATHER, "allgather", list,
             [&](DeviceCommunicator& dc, CudaStream s) {
               at::Tensor in = contiguousOf(input);
               at::Tensor gathered = at::empty({size * input.numel()}, input.options());
               dc.allGather(in.data_ptr(), gathered.data_ptr(), count(in), type, s);
               copyInto(list, gathered);
             });
}

CudaPath::WorkPtr CudaPath::allGatherBase(int rank, ::c10d::OpType opType, const char* opName,
                                          const Tensors& outputs, const Tensors& inputs,
                                          const std::vector<DataType>& types) {
  return run(rank, opType, opName, outputs, [&](DeviceCommunicator& dc, CudaStream s) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      at::Tensor in = contiguousOf(inputs[i]);
      at::Tensor out = contiguousOf(outputs[i]);
      dc.allGather(in.data_ptr(), out.data_ptr(), count(in), types[i], s);
      copyBack(outputs[i], out);
    }
  });
}

CudaPath::WorkPtr CudaPath::reduceScatterBase(int rank, ::c10d::OpType opType,
                                              const char* opName, const Tensors& outputs,
                                              const Tensors& inputs,
                                              const std::vector<DataType>& types, RedOp op) {
  return run(rank, opType, opName, outputs, [&](DeviceCommunicator& dc, CudaStream s) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      at::Tensor in = contiguousOf(inputs[i]);
      at::Tensor out = contiguousOf(outputs[i]);
      dc.reduceScatter(in.data_ptr(), out.data_ptr(), count(out), types[i], op, s);
      copyBack(outputs[i], out);
    }
  });
}

CudaPath::WorkPtr CudaPath::allToAllBase(int rank, const at::Tensor& output,
                                         const at::Tensor& input, const Splits& send,
                                         const Splits& recv, DataType type) {
  return run(rank, ::c10d::OpType::ALLTOALL_BASE, "alltoall_base", {output},
             [&](DeviceCommunicator& dc, CudaStream s) {
               at::Tensor in = contiguousOf(input);
               at::Tensor out = contiguousOf(output);
               dc.allToAllv(in.data_ptr(), send.counts.data(), send.displs.data(), out.data_ptr(),
                            recv.counts.data(), recv.displs.data(), type, s);
               copyBack(output, out);
             });
}

CudaPath::WorkPtr CudaPath::allToAll(int rank, const Tensors& outputs, const Tensors& inputs,
                                     const Splits& send, const Splits& recv, DataType type) {
  return run(rank, ::c10d::OpType::ALLTOALL, "alltoall", outputs,
             [&](DeviceCommunicator& dc, CudaStream s) {
               at::Tensor flatIn = flatCat(inputs);
               at::Tensor flatOut =
                   at::empty({static_cast<int64_t>(recv.total())}, inputs.front().options());
               dc.allToAllv(flatIn.data_ptr(), send.counts.data(), send.displs.data(),
                            flatOut.data_ptr(), recv.counts.data(), recv.displs.data(), type, s);
               copyInto(outputs, flatOut);
             });
}

CudaPath::WorkPtr CudaPath::gather(int rank, const Tensors& list, const at::Tensor& input,
                                   DataType type, int root) {
  return run(rank, ::c10d::OpType::GATHER, "gather", list,
             [&](DeviceCommunicator& dc, CudaStream s) {
               at::Tensor in = contiguousOf(input);
               at::Tensor gathered;  // the root's: every rank's input in rank order
               if (!list.empty()) {
                 gathered = at::empty({static_cast<int64_t>(list.size()) * input.numel()},
                                      input.options());
               }
               dc.gather(in.data_ptr(), gathered.defined() ? gathered.data_ptr() : nullptr,
                         count(in), type, root, s);
               if (gathered.defined()) copyInto(list, gathered);
             });
}

CudaPath::WorkPtr CudaPath::scatter(int rank, const at::Tensor& output, const Tensors& list,
                                    DataType type, int root) {
  return run(rank, ::c10d::OpType::SCATTER, "scatter", {output},
             [&](DeviceCommunicator& dc, CudaStream s) {
               at::Tensor flat;  // the root's: every rank's piece in rank order
               if (!list.empty()) flat = flatCat(list);
               at::Tensor out = contiguousOf(output);
               dc.scatter(flat.defined() ? flat.data_ptr() : nullptr, out.data_ptr(), count(out),
                          type, root, s);
               copyBack(output, out);
             });
}

void CudaPath::abort() {
  if (comm_) comm_->abort();
}

}  // namespace braid::pytorch
