#include "trainer/cuda/device_linear.h"

#include "trainer/cuda/cuda_check.h"
#include "trainer/cuda/half_kernels.h"
#include "trainer/cuda/kernels.h"

namespace braid::trainer::cuda {
namespace {

// fp16: C (float32) = alpha op(A) op(B) + beta C with half A and B, float32 accumulation (tensor
// cores). C stays float32: the next layer, the bias and the flat gradients are float32.
void halfGemm(const CudaContext& ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
              int k, const __half* a, int lda, const __half* b, int ldb, float beta, float* c,
              int ldc) {
  const float one = 1.0f;
  BRAID_CUBLAS_CHECK(
      cublasGemmEx(ctx.cublas(), ta, tb, m, n, k, &one, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb,
                   &beta, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "half GEMM m {} n {} k {}", m, n, k);
}

}  // namespace

// cuBLAS is column-major: a row-major [r, c] matrix is its column-major [c, r] transpose, so
// y = x W^T (row-major) is y^T = W x^T, i.e. sgemm(T, N) on the stored arrays.

DeviceLinear::DeviceLinear(const LayerPlan& plan, CudaContext& ctx, const FlatBuffers& flat)
    : ctx_(ctx),
      in_(plan.in),
      out_(plan.out),
      weight_(flat.params + plan.paramBegin),
      bias_(weight_ + static_cast<size_t>(plan.in) * plan.out),
      dweight_(flat.grads + plan.paramBegin),
      dbias_(dweight_ + static_cast<size_t>(plan.in) * plan.out) {
  paramBegin_ = plan.paramBegin;
  if (ctx.options().halfCompute) {
    BRAID_ENFORCE(flat.halfParams != nullptr, ErrorCode::kInternal,
                  "device Linear({}->{}): fp16 without half parameters", in_, out_);
    halfWeight_ = flat.halfParams + plan.paramBegin;
  }
}

const DeviceTensor& DeviceLinear::forward(const DeviceTensor& x) {
  BRAID_ENFORCE(!x.shape.empty() && x.perSample() == static_cast<size_t>(in_),
                ErrorCode::kInvalidUsage, "device Linear({}->{}): input shape {}", in_, out_,
                shapeString(x.shape));
  const int n = x.dim(0);
  x_ = &x;
  y_.resize({n, out_}, ctx_);
  broadcastRows(bias_, y_.ptr(), n, out_, ctx_.stream());
  if (halfWeight_) {
    halfX_.resize(x.numel(), "Linear half input");
    floatToHalf(x.ptr(), halfX_.data(), x.numel(), ctx_.stream());
    halfGemm(ctx_, CUBLAS_OP_T, CUBLAS_OP_N, out_, n, in_, halfWeight_, in_, halfX_.data(), in_,
             1.0f, y_.ptr(), out_);
    return y_;
  }
  const float one = 1.0f;
  BRAID_CUBLAS_CHECK(cublasSgemm(ctx_.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out_, n, in_, &one,
                                 weight_, in_, x.ptr(), in_, &one, y_.ptr(), out_),
                     "Linear({}->{}) forward, batch {}", in_, out_, n);
  return y_;
}

const DeviceTensor& DeviceLinear::backward(const DeviceTensor& dy) {
  BRAID_ENFORCE(x_ != nullptr && dy.shape == y_.shape, ErrorCode::kInvalidUsage,
                "device Linear({}->{}): backward with dy {} after forward output {}", in_, out_,
                shapeString(dy.shape), shapeString(y_.shape));
  const int n = dy.dim(0);
  if (halfWeight_) return backwardHalf(dy);
  const float one = 1.0f, zero = 0.0f;
  // dW^T [in, out] += x^T dy  (row-major dW [out, in] += dy^T x)
  BRAID_CUBLAS_CHECK(cublasSgemm(ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, n, &one,
                                 x_->ptr(), in_, dy.ptr(), out_, &one, dweight_, in_),
                     "Linear({}->{}) weight gradient, batch {}", in_, out_, n);
  addColumnSums(dy.ptr(), n, out_, dbias_, ctx_.stream());
  dx_.resize(x_->shape, ctx_);
  // dx^T [in, n] = W^T dy^T  (row-major dx = dy W)
  BRAID_CUBLAS_CHECK(cublasSgemm(ctx_.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in_, n, out_, &one,
                                 weight_, in_, dy.ptr(), out_, &zero, dx_.ptr(), in_),
                     "Linear({}->{}) input gradient, batch {}", in_, out_, n);
  return dx_;
}

const DeviceTensor& DeviceLinear::backwardHalf(const DeviceTensor& dy) {
  const int n = dy.dim(0);
  halfDy_.resize(dy.numel(), "Linear half dy");
  floatToHalf(dy.ptr(), halfDy_.data(), dy.numel(), ctx_.stream());
  halfGemm(ctx_, CUBLAS_OP_N, CUBLAS_OP_T, in_, out_, n, halfX_.data(), in_, halfDy_.data(), out_,
           1.0f, dweight_, in_);
  addColumnSums(dy.ptr(), n, out_, dbias_, ctx_.stream());
  dx_.resize(x_->shape, ctx_);
  halfGemm(ctx_, CUBLAS_OP_N, CUBLAS_OP_N, in_, n, out_, halfWeight_, in_, halfDy_.data(), out_,
           0.0f, dx_.ptr(), in_);
  return dx_;
}

}  // namespace braid::trainer::cuda
