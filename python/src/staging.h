// The list forms of ops (all_gather, gather, scatter, all_to_all, the coalesced all-reduce) move
// a list of tensors as one flat buffer, each tensor's elements end to end in list order. What
// the CPU path (process_group.cc) and the CUDA path (cuda_path.cc) share of it.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace braid::pytorch {

/// allToAllv's counts and displacements in elements, one block per rank in rank order.
struct Splits {
  std::vector<size_t> counts, displs;
  void add(size_t n);
  size_t total() const;
};

/// The blocks of `list` packed end to end: counts[i] = list[i].numel().
Splits splitsOfList(const std::vector<at::Tensor>& list);

/// The tensors of `list` (not empty) flattened and concatenated in order: a new tensor on their
/// device (for CUDA tensors a torch op on the current stream).
at::Tensor flatCat(const std::vector<at::Tensor>& list);

/// Views of the 1-D tensor `flat`, one per tensor of `like`, shaped as it, laid end to end from
/// element 0 (the inverse of flatCat).
std::vector<at::Tensor> viewsLike(const at::Tensor& flat, const std::vector<at::Tensor>& like);

}  // namespace braid::pytorch
