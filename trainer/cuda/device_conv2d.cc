#include "trainer/cuda/device_conv2d.h"

#include <string>

#include "trainer/cuda/cuda_check.h"
#include "trainer/cuda/half_kernels.h"

namespace braid::trainer::cuda {
namespace {

// Workspace an algorithm may ask for; the fastest one under it is taken.
constexpr size_t kMaxWorkspace = size_t{512} << 20;

std::string convName(const LayerPlan& p, const std::vector<int>& x) {
  return fmt::format("Conv2d({}->{}, k{}, s{}, p{}) input {}", p.in, p.out, p.kernel, p.stride,
                     p.pad, shapeString(x));
}

// The first (fastest) result that succeeded within the workspace limit, with the TF32 rule.
// Without TF32 FMA results come first, then default-math ones, then any (the descriptor keeps
// its FMA math type, which keeps every algorithm off the tensor cores); with TF32 (or fp16,
// where tensor cores are the point) the fastest, its math type then set on the direction's
// descriptor (as cuDNN asks).
template <typename Perf>
const Perf& pickAlgo(const Perf* perf, int count, bool allowTf32, const char* what,
                     const std::string& name) {
  for (cudnnMathType_t want : {CUDNN_FMA_MATH, CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH}) {
    for (int i = 0; i < count; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxWorkspace) continue;
      // Never float32 computed in half precision.
      if (perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
      if (allowTf32 || perf[i].mathType == want) return perf[i];
    }
  }
  fail(ErrorCode::kCudaError, "{}: cuDNN found no usable {} algorithm among {} (TF32 {})", name,
       what, count, allowTf32 ? "allowed" : "off");
}

void useMathType(cudnnConvolutionDescriptor_t conv, cudnnMathType_t math, const std::string& name) {
  BRAID_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, math), "{}: math type {}", name,
                    static_cast<int>(math));
}

}  // namespace

struct DeviceConv2d::Plan {
  // x, w and yConv are what the convolutions see: float32, or half in fp16. y is the float32
  // output (the bias and the bias gradient work on it); in fp32 yConv is y.
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, yHalf = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnTensorDescriptor_t yConv() const { return yHalf ? yHalf : y; }
  // One per direction (forward, backward-data, backward-filter): each gets the math type of the
  // algorithm found for it.
  cudnnConvolutionDescriptor_t fwdConv = nullptr, dataConv = nullptr, filterConv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwdData{};
  cudnnConvolutionBwdFilterAlgo_t bwdFilter{};
  size_t fwdBytes = 0, bwdDataBytes = 0, bwdFilterBytes = 0;
  std::vector<int> yShape;

  ~Plan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (yHalf) cudnnDestroyTensorDescriptor(yHalf);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (w) cudnnDestroyFilterDescriptor(w);
    for (auto* c : {fwdConv, dataConv, filterConv}) {
      if (c) cudnnDestroyConvolutionDescriptor(c);
    }
  }
};

DeviceConv2d::DeviceConv2d(const LayerPlan& plan, CudaContext& ctx, const FlatBuffers& flat)
    : ctx_(ctx),
      plan_(plan),
      weight_(flat.params + plan.paramBegin),
      dweight_(flat.grads + plan.paramBegin) {
  paramBegin_ = plan.paramBegin;
  if (plan.bias) {
    const size_t w = static_cast<size_t>(plan.out) * plan.in * plan.kernel * plan.kernel;
    bias_ = weight_ + w;
    dbias_ = dweight_ + w;
  }
  if (ctx.options().halfCompute) {
    BRAID_ENFORCE(flat.halfParams != nullptr, ErrorCode::kInternal,
                  "device Conv2d({}->{}): fp16 without half parameters", plan.in, plan.out);
    halfWeight_ = flat.halfParams + plan.paramBegin;
  }
}

DeviceConv2d::~DeviceConv2d() = default;

DeviceConv2d::Plan& DeviceConv2d::planFor(const std::vector<int>& s) {
  auto& slot = plans_[s];
  if (slot) return *slot;
  const std::string name = convName(plan_, s);
  BRAID_ENFORCE(s.size() == 4 && s[1] == plan_.in, ErrorCode::kInvalidUsage, "device {}", name);
  auto p = std::make_unique<Plan>();
  cudnnHandle_t h = ctx_.cudnn();
  BRAID_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x), "{}", name);
  BRAID_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y), "{}", name);
  BRAID_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w), "{}", name);
  // fp16: half tensors and filter, float32 compute type (cuDNN's pseudo-half configuration).
  const bool half = halfWeight_ != nullptr;
  const cudnnDataType_t data = half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
  BRAID_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, data, s[0], s[1], s[2], s[3]), "{}",
      name);
  BRAID_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, data, CUDNN_TENSOR_NCHW, plan_.out, plan_.in,
                                               plan_.kernel, plan_.kernel),
                    "{}", name);
  const bool tf32 = ctx_.options().tf32Convolutions || half;
  for (auto* c : {&p->fwdConv, &p->dataConv, &p->filterConv}) {
    BRAID_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(c), "{}", name);
    BRAID_CUDNN_CHECK(
        cudnnSetConvolution2dDescriptor(*c, plan_.pad, plan_.pad, plan_.stride, plan_.stride, 1, 1,
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "{}", name);
    BRAID_CUDNN_CHECK(cudnnSetConvolutionMathType(*c, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
                      "{}", name);
  }
  int n = 0, c = 0, ho = 0, wo = 0;
  BRAID_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->fwdConv, p->x, p->w, &n, &c, &ho, &wo),
                    "{}", name);
  const int wantH = (s[2] + 2 * plan_.pad - plan_.kernel) / plan_.stride + 1;
  const int wantW = (s[3] + 2 * plan_.pad - plan_.kernel) / plan_.stride + 1;
  BRAID_ENFORCE(n == s[0] && c == plan_.out && ho == wantH && wo == wantW, ErrorCode::kInternal,
                "device {}: cuDNN gives output [{}, {}, {}, {}], nn's formula [{}, {}, {}, {}]",
                name, n, c, ho, wo, s[0], plan_.out, wantH, wantW);
  p->yShape = {n, c, ho, wo};
  BRAID_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, ho, wo), "{}",
      name);
  if (half) {
    BRAID_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->yHalf), "{}", name);
    BRAID_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(p->yHalf, CUDNN_TENSOR_NCHW, CUDNN_DATA_HALF, n, c, ho, wo),
        "{}", name);
  }
  if (plan_.bias) {
    BRAID_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->bias), "{}", name);
    BRAID_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                                 plan_.out, 1, 1),
                      "{}", name);
  }

  constexpr int kAsk = 16;
  int got = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[kAsk];
  BRAID_CUDNN_CHECK(
      cudnnFindConvolutionForwardAlgorithm(h, p->x, p->w, p->fwdConv, p->yConv(), kAsk, &got, fwd),
      "{}", name);
  const auto& f = pickAlgo(fwd, got, tf32, "forward", name);
  if (tf32) useMathType(p->fwdConv, f.mathType, name);
  p->fwd = f.algo;
  p->fwdBytes = f.memory;
  cudnnConvolutionBwdDataAlgoPerf_t bd[kAsk];
  BRAID_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(h, p->w, p->yConv(), p->dataConv,
                                                              p->x, kAsk, &got, bd),
                    "{}", name);
  const auto& d = pickAlgo(bd, got, tf32, "backward-data", name);
  if (tf32) useMathType(p->dataConv, d.mathType, name);
  p->bwdData = d.algo;
  p->bwdDataBytes = d.memory;
  cudnnConvolutionBwdFilterAlgoPerf_t bf[kAsk];
  BRAID_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(h, p->x, p->yConv(), p->filterConv,
                                                                p->w, kAsk, &got, bf),
                    "{}", name);
  const auto& wf = pickAlgo(bf, got, tf32, "backward-filter", name);
  if (tf32) useMathType(p->filterConv, wf.mathType, name);
  p->bwdFilter = wf.algo;
  p->bwdFilterBytes = wf.memory;
  slot = std::move(p);
  return *slot;
}

const DeviceTensor& DeviceConv2d::forward(const DeviceTensor& x) {
  Plan& p = planFor(x.shape);
  current_ = &p;
  x_ = &x;
  y_.resize(p.yShape, ctx_);
  const float one = 1.0f, zero = 0.0f;
  if (halfWeight_) {
    forwardHalf(p, x);
  } else {
    void* ws = ctx_.workspace(p.fwdBytes);
    BRAID_CUDNN_CHECK(
        cudnnConvolutionForward(ctx_.cudnn(), &one, p.x, x.ptr(), p.w, weight_, p.fwdConv, p.fwd,
                                ws, p.fwdBytes, &zero, p.y, y_.ptr()),
        "{} forward, algorithm {}", convName(plan_, x.shape), static_cast<int>(p.fwd));
  }
  if (bias_) {
    BRAID_CUDNN_CHECK(cudnnAddTensor(ctx_.cudnn(), &one, p.bias, bias_, &one, p.y, y_.ptr()),
                      "{} bias", convName(plan_, x.shape));
  }
  return y_;
}

const DeviceTensor& DeviceConv2d::backward(const DeviceTensor& dy) {
  BRAID_ENFORCE(current_ != nullptr && dy.shape == y_.shape, ErrorCode::kInvalidUsage,
                "device Conv2d({}->{}): backward with dy {} after forward output {}", plan_.in,
                plan_.out, shapeString(dy.shape), shapeString(y_.shape));
  Plan& p = *current_;
  if (halfWeight_) return backwardHalf(p, dy);
  const float one = 1.0f, zero = 0.0f;
  void* ws = ctx_.workspace(p.bwdFilterBytes);
  BRAID_CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx_.cudnn(), &one, p.x, x_->ptr(), p.y,
                                                   dy.ptr(), p.filterConv, p.bwdFilter, ws,
                                                   p.bwdFilterBytes, &one, p.w, dweight_),
                    "{} backward-filter, algorithm {}", convName(plan_, x_->shape),
                    static_cast<int>(p.bwdFilter));
  if (dbias_) {
    BRAID_CUDNN_CHECK(
        cudnnConvolutionBackwardBias(ctx_.cudnn(), &one, p.y, dy.ptr(), &one, p.bias, dbias_),
        "{} backward-bias", convName(plan_, x_->shape));
  }
  dx_.resize(x_->shape, ctx_);
  ws = ctx_.workspace(p.bwdDataBytes);
  BRAID_CUDNN_CHECK(
      cudnnConvolutionBackwardData(ctx_.cudnn(), &one, p.w, weight_, p.y, dy.ptr(), p.dataConv,
                                   p.bwdData, ws, p.bwdDataBytes, &zero, p.x, dx_.ptr()),
      "{} backward-data, algorithm {}", convName(plan_, x_->shape), static_cast<int>(p.bwdData));
  return dx_;
}

// fp16: half copies of x (kept for backward-filter) and of the output; the output widened to
// float32 for the bias and the next layer.
void DeviceConv2d::forwardHalf(Plan& p, const DeviceTensor& x) {
  const float one = 1.0f, zero = 0.0f;
  halfX_.resize(x.numel(), "Conv2d half input");
  floatToHalf(x.ptr(), halfX_.data(), x.numel(), ctx_.stream());
  halfY_.resize(y_.numel(), "Conv2d half output");
  void* ws = ctx_.workspace(p.fwdBytes);
  BRAID_CUDNN_CHECK(
      cudnnConvolutionForward(ctx_.cudnn(), &one, p.x, halfX_.data(), p.w, halfWeight_, p.fwdConv,
                              p.fwd, ws, p.fwdBytes, &zero, p.yConv(), halfY_.data()),
      "{} half forward, algorithm {}", convName(plan_, x.shape), static_cast<int>(p.fwd));
  halfToFloat(halfY_.data(), y_.ptr(), y_.numel(), ctx_.stream());
}

// fp16: the weight gradient comes out in half (as autocast's) and is added to the float32 flat
// gradients; the bias gradient sums the float32 dy; dx is widened to float32.
const DeviceTensor& DeviceConv2d::backwardHalf(Plan& p, const DeviceTensor& dy) {
  const float one = 1.0f, zero = 0.0f;
  const std::string name = convName(plan_, x_->shape);
  halfDy_.resize(dy.numel(), "Conv2d half dy");
  floatToHalf(dy.ptr(), halfDy_.data(), dy.numel(), ctx_.stream());
  const size_t wn = static_cast<size_t>(plan_.out) * plan_.in * plan_.kernel * plan_.kernel;
  halfDw_.resize(wn, "Conv2d half weight gradient");
  void* ws = ctx_.workspace(p.bwdFilterBytes);
  BRAID_CUDNN_CHECK(
      cudnnConvolutionBackwardFilter(ctx_.cudnn(), &one, p.x, halfX_.data(), p.yConv(),
                                     halfDy_.data(), p.filterConv, p.bwdFilter, ws,
                                     p.bwdFilterBytes, &zero, p.w, halfDw_.data()),
      "{} half backward-filter, algorithm {}", name, static_cast<int>(p.bwdFilter));
  addHalfToFloat(halfDw_.data(), dweight_, wn, ctx_.stream());
  if (dbias_) {
    BRAID_CUDNN_CHECK(
        cudnnConvolutionBackwardBias(ctx_.cudnn(), &one, p.y, dy.ptr(), &one, p.bias, dbias_),
        "{} backward-bias", name);
  }
  halfDx_.resize(x_->numel(), "Conv2d half dx");
  ws = ctx_.workspace(p.bwdDataBytes);
  BRAID_CUDNN_CHECK(cudnnConvolutionBackwardData(ctx_.cudnn(), &one, p.w, halfWeight_, p.yConv(),
                                                 halfDy_.data(), p.dataConv, p.bwdData, ws,
                                                 p.bwdDataBytes, &zero, p.x, halfDx_.data()),
                    "{} half backward-data, algorithm {}", name, static_cast<int>(p.bwdData));
  dx_.resize(x_->shape, ctx_);
  halfToFloat(halfDx_.data(), dx_.ptr(), dx_.numel(), ctx_.stream());
  return dx_;
}

}  // namespace braid::trainer::cuda
