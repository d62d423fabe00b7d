// CUDA tensors in the braid process group: each op runs through braid's DeviceCommunicator
// (comm/device) on the tensor's current CUDA stream, which waits for the result as it would for
// any kernel; staging copies (non-contiguous tensors, gathered lists) are torch ops on that same
// stream, so they are ordered before and after the collective without any host wait.
//
// Work completion is ProcessGroupNCCL's: an event recorded on the stream after the op;
// wait() makes the caller's current stream wait for it (it never blocks the host);
// is_completed() queries it; get_future() is completed at once with CUDA events on that stream,
// so callbacks (DDP's, comm hooks') run when the GPU gets there. Errors are asynchronous, as
// with NCCL: the op's stream is released, the communicator keeps the error, and wait(),
// is_completed() and every later op on the group raise it.
//
// Built where both braid and the torch have CUDA (BRAID_TORCH_CUDA); elsewhere the group refuses
// CUDA tensors naming why.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <mutex>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "braid/braid.hpp"
#include "staging.h"

namespace braid::pytorch {

/// One process group's CUDA collectives (one device per rank). Every method enqueues on the
/// current stream of device() and returns the op's Work; arguments were checked by the group.
class CudaPath {
 public:
  using WorkPtr = c10::intrusive_ptr<::c10d::Work>;
  using Tensors = std::vector<at::Tensor>;

  /// A DeviceCommunicator over `host` on CUDA device `device` (collective over the group).
  CudaPath(Communicator& host, int device, double timeoutSeconds);
  ~CudaPath();

  int device() const { return device_; }
  WorkPtr allReduce(int rank, const at::Tensor& tensor, DataType type, RedOp op);
  WorkPtr broadcast(int rank, const at::Tensor& tensor, DataType type, int root);
  WorkPtr reduce(int rank, const at::Tensor& tensor, DataType type, RedOp op, int root);
  /// One flat all-reduce per group of tensors (groups[i] all of types[i]); outputs: every tensor.
  WorkPtr allReduceCoalesced(int rank, const std::vector<Tensors>& groups,
                             const std::vector<DataType>& types, RedOp op, const Tensors& outputs);
  /// allgather's list form: list[r] receives rank r's input.
  WorkPtr allGather(int rank, const Tensors& list, const at::Tensor& input, DataType type,
                    int size);
  /// One _allgather_base / _reduce_scatter_base per (outputs[i], inputs[i]).
  WorkPtr allGatherBase(int rank, ::c10d::OpType opType, const char* opName,
                        const Tensors& outputs, const Tensors& inputs,
                        const std::vector<DataType>& types);
  WorkPtr reduceScatterBase(int rank, ::c10d::OpType opType, const char* opName,
                            const Tensors& outputs, const Tensors& inputs,
                            const std::vector<DataType>& types, RedOp op);
  /// all_to_all_single: braid's allToAllv from `input` into `output` with the block layouts
  /// `send` and `recv` (elements, rank order).
  WorkPtr allToAllBase(int rank, const at::Tensor& output, const at::Tensor& input,
                       const Splits& send, const Splits& recv, DataType type);
  /// all_to_all's list form: inputs[q] goes to rank q, outputs[q] comes from rank q (layouts
  /// `send` and `recv` of the lists packed end to end), through flat buffers.
  WorkPtr allToAll(int rank, const Tensors& outputs, const Tensors& inputs, const Splits& send,
                   const Splits& recv, DataType type);
  /// gather to `root`: list (the root's, one tensor per rank; empty on the others) receives
  /// each rank's `input`.
  WorkPtr gather(int rank, const Tensors& list, const at::Tensor& input, DataType type, int root);
  /// scatter from `root`: `output` receives list[rank] of the root's list (empty elsewhere).
  WorkPtr scatter(int rank, const at::Tensor& output, const Tensors& list, DataType type,
                  int root);
  void abort();

 private:
  /// Runs `body` (the op's torch copies and braid calls on the stream it is given) and returns
  /// the Work for `outputs`; braid's errors raise a RuntimeError naming `opName`.
  WorkPtr run(int rank, ::c10d::OpType type, const char* opName, Tensors outputs,
              const std::function<void(DeviceCommunicator&, CudaStream)>& body);
  /// run() of an in-place op on one tensor: `op` gets its contiguous buffer and element count.
  WorkPtr inPlace(int rank, ::c10d::OpType type, const char* opName, const at::Tensor& tensor,
                  const std::function<void(DeviceCommunicator&, void*, size_t, CudaStream)>& op);

  int device_;
  std::shared_ptr<DeviceCommunicator> comm_;
};

}  // namespace braid::pytorch
