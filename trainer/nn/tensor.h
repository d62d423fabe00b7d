// A dense float32 tensor in NCHW (or N x features) layout: the activations passed between layers.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace braid::trainer {

/// The element type of activations. float32 today; kept as one alias so float16 activations can
/// be introduced later without touching every signature.
using Activation = float;

/// A contiguous row-major tensor of up to 4 dimensions. Owns its storage.
struct Tensor {
  std::vector<int> shape;
  std::vector<Activation> data;

  Tensor() = default;
  explicit Tensor(std::vector<int> dims) { resize(std::move(dims)); }

  /// Sets the shape and resizes the storage (contents unspecified where it grew).
  void resize(std::vector<int> dims);
  /// Number of elements implied by the shape.
  size_t numel() const { return data.size(); }
  int dim(size_t i) const { return shape.at(i); }
  /// Elements per sample: numel() / shape[0].
  size_t perSample() const { return shape.empty() || shape[0] == 0 ? 0 : numel() / shape[0]; }
  Activation* ptr() { return data.data(); }
  const Activation* ptr() const { return data.data(); }
};

/// Number of elements of a shape.
size_t shapeNumel(const std::vector<int>& shape);
/// "[2, 3, 28, 28]".
std::string shapeString(const std::vector<int>& shape);

}  // namespace braid::trainer
