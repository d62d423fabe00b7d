#include "trainer/nn/relu.h"

#include <algorithm>

#include "common/error.h"

namespace braid::trainer {

const Tensor& Relu::forward(const Tensor& x) {
  y_.resize(x.shape);
  const float* in = x.ptr();
  float* out = y_.ptr();
  for (size_t i = 0, n = x.numel(); i < n; ++i) out[i] = std::max(in[i], 0.0f);
  return y_;
}

const Tensor& Relu::backward(const Tensor& dy) {
  BRAID_ENFORCE(dy.shape == y_.shape, ErrorCode::kInvalidUsage,
                "ReLU: backward with dy {} after forward output {}", shapeString(dy.shape),
                shapeString(y_.shape));
  dx_.resize(dy.shape);
  const float* y = y_.ptr();
  const float* g = dy.ptr();
  float* out = dx_.ptr();
  // Load g unconditionally so the select vectorises.
  for (size_t i = 0, n = dy.numel(); i < n; ++i) {
    const float gi = g[i];
    out[i] = y[i] > 0.0f ? gi : 0.0f;
  }
  return dx_;
}

}  // namespace braid::trainer
