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
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "braid/braid.hpp"
#include "work.h"

namespace braid::pytorch {

// 2.x split the process group into a ProcessGroup front and per-device Backends; the backend
// API is the 1.x ProcessGroup API, so one class serves both.
#if TORCH_VERSION_MAJOR >= 2
using GroupBase = ::c10d::Backend;
#else
using GroupBase = ::c10d::ProcessGroup;
#endif

class Watcher;

/// The "braid" backend. Every op validates its tensors (CPU, dense, a dtype braid has),
/// stages non-contiguous ones through a contiguous copy, submits braid's non-blocking op and
/// returns a BraidWork at once. Ops run in issue order on this group's communicator; braid
/// detects ranks that disagree (shape, dtype, op, root) and fails the op on every rank.
/// Unsupported ops raise NotImplementedError naming the op. Thread-safe.
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
  c10::intrusive_ptr<::c10d::Work> barrier(const ::c10d::BarrierOptions& opts) override;
  /// Point-to-point: matched in issue order per pair; `tag` is not used for matching.
  c10::intrusive_ptr<::c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                        int tag) override;
  c10::intrusive_ptr<::c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                        int tag) override;

  // Not supported by braid: each raises NotImplementedError naming the op.
  c10::intrusive_ptr<::c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const ::c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const ::c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                                 std::vector<int64_t>& outputSplits,
                                                 std::vector<int64_t>& inputSplits,
                                                 const ::c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                            std::vector<at::Tensor>& inputs,
                                            const ::c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                                 int tag) override;
  void monitoredBarrier(const ::c10d::BarrierOptions& opts, bool waitAllRanks) override;

 private:
  c10::intrusive_ptr<BraidWork> makeWork(::c10d::OpType type, const char* opName);
  /// The contiguous buffer braid writes for `tensor`: the tensor itself, or a staging copy
  /// that `work` copies back into it on completion.
  at::Tensor outputBuffer(BraidWork& work, const at::Tensor& tensor);
  [[noreturn]] void unsupported(const char* opName);

  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<Watcher> watcher_;
  double timeoutSeconds_;
};

}  // namespace braid::pytorch
