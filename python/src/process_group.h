// braid as a PyTorch distributed backend: a c10d::ProcessGroup (PyTorch 1.x) or c10d::Backend
// (PyTorch 2.x) whose collectives run on a braid Communicator over CPU tensors.
#pragma once

#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "braid/braid.hpp"
#include "work.h"

/// True when building against torch >= major.minor.
#define BRAID_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||        \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
/// `override` on torch >= 2.15 (the 2.x built and tested here), nothing before: the 2.x-only
/// virtuals below appeared at various 2.x releases; without the keyword such a method still
/// overrides where the base declares it and is a plain method where it does not.
#if BRAID_TORCH_AT_LEAST(2, 15)
#define BRAID_OVERRIDE_2_15 override
#else
#define BRAID_OVERRIDE_2_15
#endif

namespace braid::pytorch {

// 2.x split the process group into a ProcessGroup front and per-device Backends; the backend
// API is the 1.x ProcessGroup API, so one class serves both.
#if TORCH_VERSION_MAJOR >= 2
using GroupBase = ::c10d::Backend;
#else
using GroupBase = ::c10d::ProcessGroup;
#endif

class Watcher;
class CudaPath;

/// The "braid" backend. Every op validates its tensors (CPU, dense, a dtype braid has),
/// stages non-contiguous ones through a contiguous copy, submits braid's non-blocking op and
/// returns a BraidWork at once. Ops run in issue order on this group's communicator; braid
/// detects ranks that disagree (shape, dtype, op, root) and fails the op on every rank.
/// Unsupported ops raise NotImplementedError naming the op. CUDA tensors take braid's device path
/// (cuda_path.h) in allreduce, allreduce_coalesced, broadcast, reduce, allgather,
/// _allgather_base, _reduce_scatter_base, the coalesced forms, alltoall_base, alltoall, gather
/// and scatter, on the tensors' current stream; other ops refuse them naming the device.
/// Thread-safe.
class BraidProcessGroup : public GroupBase {
 public:
  /// Collective over `size` ranks: bootstraps a braid Communicator through `store` (the
  /// group's PrefixStore) with `timeout` as braid's timeout. Throws naming the failure.
  BraidProcessGroup(const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout);
  ~BraidProcessGroup() override;

  /// The creator registered with torch.distributed.Backend.register_backend.
  static c10::intrusive_ptr<GroupBase> create(const c10::intrusive_ptr<::c10d::Store>& store,
                                              int rank, int size,
                                              const std::chrono::duration<float>& timeout);

  const std::string getBackendName() const override { return "braid"; }

  c10::intrusive_ptr<::c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                             const ::c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                             const ::c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const ::c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                          const ::c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                             std::vector<at::Tensor>& inputs,
                                             const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                   const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const ::c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const ::c10d::ReduceScatterOptions& opts) override;
  /// One all-gather per input (braid runs them back to back).
  c10::intrusive_ptr<::c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const ::c10d::AllgatherOptions& opts) override;
#if TORCH_VERSION_MAJOR >= 2
  /// One _allgather_base / _reduce_scatter_base per pair (the coalescing manager's fast path).
  c10::intrusive_ptr<::c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const ::c10d::AllgatherOptions& opts) BRAID_OVERRIDE_2_15;
  c10::intrusive_ptr<::c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const ::c10d::ReduceScatterOptions& opts) BRAID_OVERRIDE_2_15;
#endif
  /// gather and scatter run as braid's gather and scatter (CPU tensors; CUDA tensors on the
  /// device path), staged through one flat buffer on the root.
  c10::intrusive_ptr<::c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const ::c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const ::c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> barrier(const ::c10d::BarrierOptions& opts) override;
  /// Every rank but 0 sends rank 0 a token and waits for its answer. Rank 0 waits opts.timeout
  /// (else the group's), the others 5 s longer (rank 0 reports first): a rank that does not
  /// arrive in time is named in rank 0's "timed out" error (braid
  /// receives in issue order, so rank 0 names the first missing rank and those after it as
  /// unconfirmed), and the group is aborted (its pending receives would match later messages).
  void monitoredBarrier(const ::c10d::BarrierOptions& opts, bool waitAllRanks) override;
  /// Point-to-point: matched in issue order per pair; the tags of a matched send and recv must
  /// agree (else both fail naming them); negative tags are refused.
  c10::intrusive_ptr<::c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                        int tag) override;
  c10::intrusive_ptr<::c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                        int tag) override;

#if TORCH_VERSION_MAJOR >= 2
  /// Aborts the braid communicator at once: ops in flight here fail with "aborted", peers see
  /// this rank's abort, later calls fail. (torch.distributed's _abort_process_group.)
  void abort() BRAID_OVERRIDE_2_15;
  /// destroy_process_group(): waits (at most min(timeout, 30 s)) for a barrier with the other
  /// ranks, so ops they still finish are not cut short, then aborts the communicator.
  void shutdown() BRAID_OVERRIDE_2_15;
#endif

  /// all_to_all_single: braid's allToAllv (equal splits of dim 0 when the split lists are
  /// empty, else rows of dim 0 per rank); all_to_all: the list form, staged through flat
  /// buffers. CPU tensors, and CUDA tensors on the device path (allToAllv there too).
  c10::intrusive_ptr<::c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                                 std::vector<int64_t>& outputSplits,
                                                 std::vector<int64_t>& inputSplits,
                                                 const ::c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                            std::vector<at::Tensor>& inputs,
                                            const ::c10d::AllToAllOptions& opts) override;
  /// recv without src (dist.recv(t), dist.irecv(t)): braid's recvAnySource, the first message
  /// with `tag` any rank sends this one (per sender in issue order); the Work's sourceRank()
  /// names the sender once it completed. A message of another size than the tensor fails it.
  c10::intrusive_ptr<::c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                                 int tag) override;

 private:
  c10::intrusive_ptr<BraidWork> makeWork(::c10d::OpType type, const char* opName);
  /// A recv's Work: the checks, the output buffer (staged when the tensor is not contiguous),
  /// and `post`(buffer, count, type) submitting braid's receive into it.
  c10::intrusive_ptr<BraidWork> recvWork(
      std::vector<at::Tensor>& tensors, int tag, ::c10d::OpType opType, const char* opName,
      const std::function<Request(void*, size_t, DataType)>& post);
  /// The contiguous buffer braid writes for `tensor`: the tensor itself, or a staging copy
  /// that `work` copies back into it on completion.
  at::Tensor outputBuffer(BraidWork& work, const at::Tensor& tensor);
  // Submit one braid op into `work` (shared by the single and the coalesced forms).
  void submitAllgather(BraidWork& work, const std::vector<at::Tensor>& outputs,
                       const at::Tensor& input, const char* opName);
  void submitAllgatherBase(BraidWork& work, const at::Tensor& output, const at::Tensor& input,
                           const char* opName);
  void submitReduceScatterBase(BraidWork& work, const at::Tensor& output, const at::Tensor& input,
                               RedOp op, const char* opName);

  /// The CUDA path for ops on `tensors` (all on one CUDA device), made at the first such op (a
  /// collective step: every rank makes it in the same op). Raises where this build has none.
  CudaPath& cudaFor(const std::vector<at::Tensor>& tensors, const char* opName);
  /// The CUDA forms of _allgather_base and _reduce_scatter_base, one op per pair (several:
  /// the tensor-coalesced forms).
  c10::intrusive_ptr<::c10d::Work> cudaAllgatherBase(const std::vector<at::Tensor>& outputs,
                                                     const std::vector<at::Tensor>& inputs,
                                                     ::c10d::OpType type, const char* opName);
  c10::intrusive_ptr<::c10d::Work> cudaReduceScatterBase(const std::vector<at::Tensor>& outputs,
                                                         const std::vector<at::Tensor>& inputs,
                                                         RedOp op, ::c10d::OpType type,
                                                         const char* opName);
  // The checks of allgather (list form), _allgather_base and _reduce_scatter_base, for both
  // paths; each returns braid's element type.
  DataType checkAllgather(const std::vector<at::Tensor>& list, const at::Tensor& input,
                          const char* opName);
  DataType checkAllgatherBase(const at::Tensor& output, const at::Tensor& input,
                              const char* opName);
  DataType checkReduceScatterBase(const at::Tensor& output, const at::Tensor& input, RedOp op,
                                  const char* opName);

  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<Watcher> watcher_;
  double timeoutSeconds_;
  std::mutex cudaMutex_;
  std::unique_ptr<CudaPath> cuda_;
};

}  // namespace braid::pytorch
