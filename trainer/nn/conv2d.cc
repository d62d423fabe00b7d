#include "trainer/nn/conv2d.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"
#include "trainer/nn/blas.h"

namespace braid::trainer {

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

namespace {

// Output columns ow whose input column ow*stride - pad + kj lies inside [0, w): [lo, hi).
void validColumns(int wo, int w, int stride, int pad, int kj, int& lo, int& hi) {
  // ow >= ceil((pad - kj) / stride) and ow <= floor((w - 1 + pad - kj) / stride).
  const int first = pad - kj;
  lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  const int last = w - 1 + pad - kj;
  hi = last < 0 ? 0 : std::min(wo, last / stride + 1);
  if (hi < lo) hi = lo;
}

}  // namespace

void Conv2d::im2col(const Tensor& x) {
  const int n = x.dim(0), h = x.dim(2), w = x.dim(3);
  const size_t p = static_cast<size_t>(ho_) * wo_;
  const size_t np = n * p;
  col_.resize(static_cast<size_t>(in_) * k_ * k_ * np);
  for (int c = 0; c < in_; ++c) {
    for (int ki = 0; ki < k_; ++ki) {
      for (int kj = 0; kj < k_; ++kj) {
        int lo, hi;
        validColumns(wo_, w, stride_, pad_, kj, lo, hi);
        float* row = col_.data() + ((static_cast<size_t>(c) * k_ + ki) * k_ + kj) * np;
        for (int s = 0; s < n; ++s) {
          const float* img = x.ptr() + (static_cast<size_t>(s) * in_ + c) * h * w;
          float* dst = row + s * p;
          for (int oh = 0; oh < ho_; ++oh) {
            const int ih = oh * stride_ - pad_ + ki;
            float* d = dst + static_cast<size_t>(oh) * wo_;
            if (ih < 0 || ih >= h) {
              std::fill(d, d + wo_, 0.0f);
              continue;
            }
            const float* src = img + static_cast<size_t>(ih) * w - pad_ + kj;
            std::fill(d, d + lo, 0.0f);
            if (stride_ == 1) {
              std::copy(src + lo, src + hi, d + lo);
            } else {
              for (int ow = lo; ow < hi; ++ow) d[ow] = src[ow * stride_];
            }
            std::fill(d + hi, d + wo_, 0.0f);
          }
        }
      }
    }
  }
}

void Conv2d::col2im(const float* dcol, Tensor& dx) const {
  const int n = dx.dim(0), h = dx.dim(2), w = dx.dim(3);
  const size_t p = static_cast<size_t>(ho_) * wo_;
  const size_t np = n * p;
  std::fill(dx.data.begin(), dx.data.end(), 0.0f);
  for (int c = 0; c < in_; ++c) {
    for (int ki = 0; ki < k_; ++ki) {
      for (int kj = 0; kj < k_; ++kj) {
        int lo, hi;
        validColumns(wo_, w, stride_, pad_, kj, lo, hi);
        const float* row = dcol + ((static_cast<size_t>(c) * k_ + ki) * k_ + kj) * np;
        for (int s = 0; s < n; ++s) {
          float* img = dx.ptr() + (static_cast<size_t>(s) * in_ + c) * h * w;
          const float* src = row + s * p;
          for (int oh = 0; oh < ho_; ++oh) {
            const int ih = oh * stride_ - pad_ + ki;
            if (ih < 0 || ih >= h) continue;
            float* dst = img + static_cast<size_t>(ih) * w - pad_ + kj;
            const float* sr = src + static_cast<size_t>(oh) * wo_;
            if (stride_ == 1) {
              for (int ow = lo; ow < hi; ++ow) dst[ow] += sr[ow];
            } else {
              for (int ow = lo; ow < hi; ++ow) dst[ow * stride_] += sr[ow];
            }
          }
        }
      }
    }
  }
}

const Tensor& Conv2d::forward(const Tensor& x) {
  BRAID_ENFORCE(x.shape.size() == 4 && x.dim(1) == in_, ErrorCode::kInvalidUsage,
                "{}: input shape {} (want [N, {}, H, W])", describe(), shapeString(x.shape), in_);
  const int n = x.dim(0), h = x.dim(2), w = x.dim(3);
  ho_ = (h + 2 * pad_ - k_) / stride_ + 1;
  wo_ = (w + 2 * pad_ - k_) / stride_ + 1;
  BRAID_ENFORCE(ho_ > 0 && wo_ > 0, ErrorCode::kInvalidUsage, "{}: input {} too small", describe(),
                shapeString(x.shape));
  x_ = &x;
  const int p = ho_ * wo_;
  const int np = n * p;
  const int kk = in_ * k_ * k_;
  lastFlops_ = 2.0 * out_ * kk * p;
  im2col(x);
  ymat_.resize(static_cast<size_t>(out_) * np);
  gemm(false, false, out_, np, kk, 1.0f, store_.value(weight_), kk, col_.data(), np, 0.0f,
       ymat_.data(), np);
  y_.resize({n, out_, ho_, wo_});
  const float* b = hasBias_ ? store_.value(bias_) : nullptr;
  for (int s = 0; s < n; ++s) {
    for (int o = 0; o < out_; ++o) {
      const float* src = ymat_.data() + static_cast<size_t>(o) * np + static_cast<size_t>(s) * p;
      float* dst = y_.ptr() + (static_cast<size_t>(s) * out_ + o) * p;
      const float add = b ? b[o] : 0.0f;
      for (int i = 0; i < p; ++i) dst[i] = src[i] + add;
    }
  }
  return y_;
}

const Tensor& Conv2d::backward(const Tensor& dy) {
  BRAID_ENFORCE(x_ != nullptr && dy.shape == y_.shape, ErrorCode::kInvalidUsage,
                "{}: backward with dy {} after forward output {}", describe(),
                shapeString(dy.shape), shapeString(y_.shape));
  const int n = dy.dim(0);
  const int p = ho_ * wo_;
  const int np = n * p;
  const int kk = in_ * k_ * k_;
  // Reorder dy from [N, out, P] into [out, N*P] (reusing ymat_'s storage).
  float* dymat = ymat_.data();
  for (int s = 0; s < n; ++s) {
    for (int o = 0; o < out_; ++o) {
      const float* src = dy.ptr() + (static_cast<size_t>(s) * out_ + o) * p;
      std::copy(src, src + p, dymat + static_cast<size_t>(o) * np + static_cast<size_t>(s) * p);
    }
  }
  if (hasBias_) {
    float* db = store_.grad(bias_);
    for (int o = 0; o < out_; ++o) {
      const float* row = dymat + static_cast<size_t>(o) * np;
      double sum = 0.0;
      for (int i = 0; i < np; ++i) sum += row[i];
      db[o] += static_cast<float>(sum);
    }
  }
  gemm(false, true, out_, kk, np, 1.0f, dymat, np, col_.data(), np, 1.0f, store_.grad(weight_), kk);
  dcol_.resize(col_.size());
  gemm(true, false, kk, np, out_, 1.0f, store_.value(weight_), kk, dymat, np, 0.0f, dcol_.data(),
       np);
  dx_.resize(x_->shape);
  col2im(dcol_.data(), dx_);
  return dx_;
}

std::string Conv2d::describe() const {
  return fmt::format("Conv2d({}->{}, k{}, s{}, p{}{})", in_, out_, k_, stride_, pad_,
                     hasBias_ ? "" : ", no bias");
}

}  // namespace braid::trainer
