#include "trainer/nn/conv2d.h"

#include <fmt/format.h>

#include <dnnl.hpp>

#include "common/error.h"

namespace braid::trainer {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

dnnl::engine& cpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& cpuStream() {
  thread_local dnnl::stream stream(cpuEngine());
  return stream;
}

// A memory in the layout `want`, fed from (or draining to) a plain user buffer: when the layouts
// differ the plan owns a buffer of its own and a reorder between the two.
struct Staged {
  memory user;   // plain layout over the caller's pointer (handle set per call)
  memory inner;  // what the primitive reads or writes (== user when layouts agree)
  bool reordered = false;

  void init(const memory::desc& plain, const memory::desc& want) {
    user = memory(plain, cpuEngine(), DNNL_MEMORY_NONE);
    reordered = plain != want;
    inner = reordered ? memory(want, cpuEngine()) : user;
  }
  void in(const float* p) {
    user.set_data_handle(const_cast<float*>(p));
    if (reordered) dnnl::reorder(user, inner).execute(cpuStream(), user, inner);
  }
  void bind(float* p) { user.set_data_handle(p); }
  void out() {
    if (reordered) dnnl::reorder(inner, user).execute(cpuStream(), inner, user);
  }
};

}  // namespace

struct Conv2d::Plan {
  std::vector<int> inputShape;
  int ho = 0, wo = 0;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwdData;
  dnnl::convolution_backward_weights bwdWeights;
  Staged src, weights, dst;               // forward
  Staged diffDst, diffSrc, bwdWeightsIn;  // backward data (bwdWeightsIn: weights)
  Staged srcForWeights, diffDstForWeights, diffWeights;
  memory bias, diffBias;           // [out], always plain
  std::vector<float> gradScratch;  // diff weights/bias before adding to the grads
};

Conv2d::Conv2d(ParamStore& store, const std::string& name, int in, int out, int kernel, int stride,
               int pad, bool bias)
    : store_(store), in_(in), out_(out), k_(kernel), stride_(stride), pad_(pad), hasBias_(bias) {
  BRAID_ENFORCE(in > 0 && out > 0 && kernel > 0 && stride > 0 && pad >= 0, ErrorCode::kInvalidUsage,
                "Conv2d '{}': in {} out {} kernel {} stride {} pad {}", name, in, out, kernel,
                stride, pad);
  paramBegin_ = store.numParams();
  const int fanIn = in * kernel * kernel;
  weight_ =
      store.addParam(name + ".weight", {out, in, kernel, kernel}, Init::kKaimingUniform, fanIn);
  if (bias) bias_ = store.addParam(name + ".bias", {out}, Init::kKaimingUniform, fanIn);
}

Conv2d::~Conv2d() = default;

Conv2d::Plan& Conv2d::planFor(const std::vector<int>& shape) {
  if (plan_ && plan_->inputShape == shape) return *plan_;
  const int n = shape[0], h = shape[2], w = shape[3];
  auto plan = std::make_unique<Plan>();
  plan->inputShape = shape;
  plan->ho = (h + 2 * pad_ - k_) / stride_ + 1;
  plan->wo = (w + 2 * pad_ - k_) / stride_ + 1;
  BRAID_ENFORCE(plan->ho > 0 && plan->wo > 0, ErrorCode::kInvalidUsage, "{}: input {} too small",
                describe(), shapeString(shape));
  const memory::dims srcDims{n, in_, h, w}, weightDims{out_, in_, k_, k_},
      dstDims{n, out_, plan->ho, plan->wo}, biasDims{out_};
  const memory::dims strides{stride_, stride_}, padding{pad_, pad_};
  const memory::desc srcPlain(srcDims, Dt::f32, Tag::nchw),
      weightPlain(weightDims, Dt::f32, Tag::oihw), dstPlain(dstDims, Dt::f32, Tag::nchw),
      biasPlain(biasDims, Dt::f32, Tag::x);
  const memory::desc srcAny(srcDims, Dt::f32, Tag::any), weightAny(weightDims, Dt::f32, Tag::any),
      dstAny(dstDims, Dt::f32, Tag::any);
  const memory::desc noBias;
  auto algo = dnnl::algorithm::convolution_direct;
  auto& eng = cpuEngine();

  dnnl::convolution_forward::primitive_desc fwdPd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, srcAny, weightAny,
                                      hasBias_ ? biasPlain : noBias, dstAny, strides, padding,
                                      padding),
      eng);
  dnnl::convolution_backward_data::primitive_desc dataPd(
      dnnl::convolution_backward_data::desc(algo, srcAny, weightAny, dstAny, strides, padding,
                                            padding),
      eng, fwdPd);
  dnnl::convolution_backward_weights::primitive_desc weightsPd(
      dnnl::convolution_backward_weights::desc(algo, srcAny, weightAny,
                                               hasBias_ ? biasPlain : noBias, dstAny, strides,
                                               padding, padding),
      eng, fwdPd);
  plan->fwd = dnnl::convolution_forward(fwdPd);
  plan->bwdData = dnnl::convolution_backward_data(dataPd);
  plan->bwdWeights = dnnl::convolution_backward_weights(weightsPd);
  plan->src.init(srcPlain, fwdPd.src_desc());
  plan->weights.init(weightPlain, fwdPd.weights_desc());
  plan->dst.init(dstPlain, fwdPd.dst_desc());
  plan->diffDst.init(dstPlain, dataPd.diff_dst_desc());
  plan->diffSrc.init(srcPlain, dataPd.diff_src_desc());
  plan->bwdWeightsIn.init(weightPlain, dataPd.weights_desc());
  // Backward-weights reads forward's source and backward-data's diff_dst where layouts agree.
  plan->srcForWeights.init(srcPlain, weightsPd.src_desc());
  plan->diffDstForWeights.init(dstPlain, weightsPd.diff_dst_desc());
  plan->diffWeights.init(weightPlain, weightsPd.diff_weights_desc());
  if (hasBias_) {
    plan->bias = memory(biasPlain, eng, DNNL_MEMORY_NONE);
    plan->diffBias = memory(biasPlain, eng);
  }
  plan->gradScratch.resize(static_cast<size_t>(out_) * in_ * k_ * k_);
  plan_ = std::move(plan);
  return *plan_;
}

const Tensor& Conv2d::forward(const Tensor& x) {
  BRAID_ENFORCE(x.shape.size() == 4 && x.dim(1) == in_, ErrorCode::kInvalidUsage,
                "{}: input shape {} (want [N, {}, H, W])", describe(), shapeString(x.shape), in_);
  Plan& plan = planFor(x.shape);
  x_ = &x;
  lastFlops_ = 2.0 * out_ * in_ * k_ * k_ * plan.ho * plan.wo;
  y_.resize({x.dim(0), out_, plan.ho, plan.wo});
  plan.src.in(x.ptr());
  plan.weights.in(store_.value(weight_));
  plan.dst.bind(y_.ptr());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, plan.src.inner},
                                       {DNNL_ARG_WEIGHTS, plan.weights.inner},
                                       {DNNL_ARG_DST, plan.dst.inner}};
  if (hasBias_) {
    plan.bias.set_data_handle(const_cast<float*>(store_.value(bias_)));
    args.emplace(DNNL_ARG_BIAS, plan.bias);
  }
  plan.fwd.execute(cpuStream(), args);
  plan.dst.out();
  cpuStream().wait();
  return y_;
}

const Tensor& Conv2d::backward(const Tensor& dy) {
  BRAID_ENFORCE(x_ != nullptr && plan_ && dy.shape == y_.shape, ErrorCode::kInvalidUsage,
                "{}: backward with dy {} after forward output {}", describe(),
                shapeString(dy.shape), shapeString(y_.shape));
  Plan& plan = *plan_;
  auto& stream = cpuStream();
  plan.diffDst.in(dy.ptr());
  dx_.resize(x_->shape);

  // Weight (and bias) gradients, then added to the store's gradients.
  if (plan.srcForWeights.inner.get_desc() == plan.src.inner.get_desc()) {
    plan.srcForWeights.inner = plan.src.inner;  // forward's reordered source is still valid
    plan.srcForWeights.reordered = false;
  } else {
    plan.srcForWeights.in(x_->ptr());
  }
  if (plan.diffDstForWeights.inner.get_desc() == plan.diffDst.inner.get_desc()) {
    plan.diffDstForWeights.inner = plan.diffDst.inner;
  } else {
    plan.diffDstForWeights.in(dy.ptr());
  }
  plan.diffWeights.bind(plan.gradScratch.data());
  std::unordered_map<int, memory> wargs{{DNNL_ARG_SRC, plan.srcForWeights.inner},
                                        {DNNL_ARG_DIFF_DST, plan.diffDstForWeights.inner},
                                        {DNNL_ARG_DIFF_WEIGHTS, plan.diffWeights.inner}};
  if (hasBias_) wargs.emplace(DNNL_ARG_DIFF_BIAS, plan.diffBias);
  plan.bwdWeights.execute(stream, wargs);
  plan.diffWeights.out();

  // Input gradient.
  plan.bwdWeightsIn.in(store_.value(weight_));
  plan.diffSrc.bind(dx_.ptr());
  plan.bwdData.execute(stream, {{DNNL_ARG_DIFF_DST, plan.diffDst.inner},
                                {DNNL_ARG_WEIGHTS, plan.bwdWeightsIn.inner},
                                {DNNL_ARG_DIFF_SRC, plan.diffSrc.inner}});
  plan.diffSrc.out();
  stream.wait();

  float* gw = store_.grad(weight_);
  for (size_t i = 0; i < plan.gradScratch.size(); ++i) gw[i] += plan.gradScratch[i];
  if (hasBias_) {
    const float* db = static_cast<const float*>(plan.diffBias.get_data_handle());
    float* gb = store_.grad(bias_);
    for (int o = 0; o < out_; ++o) gb[o] += db[o];
  }
  return dx_;
}

std::string Conv2d::describe() const {
  return fmt::format("Conv2d({}->{}, k{}, s{}, p{}{})", in_, out_, k_, stride_, pad_,
                     hasBias_ ? "" : ", no bias");
}

}  // namespace braid::trainer
