#include "trainer/nn/linear.h"

#include <fmt/format.h>

#include "common/error.h"
#include "trainer/nn/blas.h"

namespace braid::trainer {

Linear::Linear(ParamStore& store, const std::string& name, int in, int out)
    : store_(store), in_(in), out_(out) {
  BRAID_ENFORCE(in > 0 && out > 0, ErrorCode::kInvalidUsage, "Linear '{}': sizes {}x{}", name, in,
                out);
  paramBegin_ = store.numParams();
  weight_ = store.addParam(name + ".weight", {out, in}, Init::kKaimingUniform, in);
  bias_ = store.addParam(name + ".bias", {out}, Init::kKaimingUniform, in);
}

const Tensor& Linear::forward(const Tensor& x) {
  BRAID_ENFORCE(!x.shape.empty() && x.perSample() == static_cast<size_t>(in_),
                ErrorCode::kInvalidUsage, "Linear({}->{}): input shape {}", in_, out_,
                shapeString(x.shape));
  const int n = x.dim(0);
  x_ = &x;
  y_.resize({n, out_});
  const float* b = store_.value(bias_);
  for (int i = 0; i < n; ++i) {
    std::copy(b, b + out_, y_.ptr() + static_cast<size_t>(i) * out_);
  }
  gemm(false, true, n, out_, in_, 1.0f, x.ptr(), in_, store_.value(weight_), in_, 1.0f, y_.ptr(),
       out_);
  return y_;
}

const Tensor& Linear::backward(const Tensor& dy) {
  BRAID_ENFORCE(x_ != nullptr && dy.shape == y_.shape, ErrorCode::kInvalidUsage,
                "Linear({}->{}): backward with dy {} after forward output {}", in_, out_,
                shapeString(dy.shape), shapeString(y_.shape));
  const int n = dy.dim(0);
  gemm(true, false, out_, in_, n, 1.0f, dy.ptr(), out_, x_->ptr(), in_, 1.0f, store_.grad(weight_),
       in_);
  float* db = store_.grad(bias_);
  for (int i = 0; i < n; ++i) {
    const float* row = dy.ptr() + static_cast<size_t>(i) * out_;
    for (int o = 0; o < out_; ++o) db[o] += row[o];
  }
  dx_.resize(x_->shape);
  gemm(false, false, n, in_, out_, 1.0f, dy.ptr(), out_, store_.value(weight_), in_, 0.0f,
       dx_.ptr(), in_);
  return dx_;
}

std::string Linear::describe() const { return fmt::format("Linear({}->{})", in_, out_); }

}  // namespace braid::trainer
