#include "staging.h"

namespace braid::pytorch {

void Splits::add(size_t n) {
  displs.push_back(total());
  counts.push_back(n);
}

size_t Splits::total() const { return counts.empty() ? 0 : displs.back() + counts.back(); }

Splits splitsOfList(const std::vector<at::Tensor>& list) {
  Splits splits;
  for (const auto& t : list) splits.add(static_cast<size_t>(t.numel()));
  return splits;
}

at::Tensor flatCat(const std::vector<at::Tensor>& list) {
  std::vector<at::Tensor> flatViews;
  flatViews.reserve(list.size());
  for (const auto& t : list) flatViews.push_back(t.reshape({-1}));
  return at::cat(flatViews);
}

std::vector<at::Tensor> viewsLike(const at::Tensor& flat, const std::vector<at::Tensor>& like) {
  std::vector<at::Tensor> views;
  views.reserve(like.size());
  int64_t offset = 0;
  for (const auto& t : like) {
    views.push_back(flat.narrow(0, offset, t.numel()).view_as(t));
    offset += t.numel();
  }
  return views;
}

}  // namespace braid::pytorch
