// The layer interface: explicit forward and backward over Tensors, gradients into a ParamStore.
#pragma once

#include <cstddef>
#include <limits>
#include <string>

#include "trainer/nn/tensor.h"

namespace braid::trainer {

/// One differentiable step of a model.
///
/// forward() computes the output of a batch and keeps what backward() needs; the input tensor
/// must stay alive and unchanged until the matching backward(). backward() takes dL/dy for the
/// last forward, returns dL/dx, and ADDS dL/dparam into the ParamStore's gradient buffer (so
/// micro-batches accumulate; zero the gradients between optimizer steps). Returned references
/// point into the layer and stay valid until its next forward()/backward(). Not thread-safe.
class Layer {
 public:
  virtual ~Layer() = default;
  virtual const Tensor& forward(const Tensor& x) = 0;
  virtual const Tensor& backward(const Tensor& dy) = 0;
  /// Training mode (default) vs eval mode; only batch norm behaves differently.
  virtual void setTraining(bool training) { training_ = training; }
  bool training() const { return training_; }
  /// Short description, e.g. "Conv2d(16->32, k3, s2, p1)".
  virtual std::string describe() const = 0;
  /// Multiply-adds x 2 per sample of the GEMMs in the last forward (0 for cheap layers).
  virtual double flopsPerSample() const { return 0.0; }
  /// Flat offset of this layer's first parameter, or kNoParams when it has none. Parameters of a
  /// layer are contiguous and registered in forward order.
  size_t paramBegin() const { return paramBegin_; }
  static constexpr size_t kNoParams = std::numeric_limits<size_t>::max();

 protected:
  bool training_ = true;
  size_t paramBegin_ = kNoParams;
};

}  // namespace braid::trainer
