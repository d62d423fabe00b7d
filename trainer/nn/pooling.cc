#include "trainer/nn/pooling.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"

namespace braid::trainer {

MaxPool2d::MaxPool2d(int kernel, int stride) : k_(kernel), stride_(stride) {
  BRAID_ENFORCE(kernel > 0 && stride > 0, ErrorCode::kInvalidUsage,
                "MaxPool2d: kernel {} stride {}", kernel, stride);
}

const Tensor& MaxPool2d::forward(const Tensor& x) {
  BRAID_ENFORCE(x.shape.size() == 4 && x.dim(2) >= k_ && x.dim(3) >= k_, ErrorCode::kInvalidUsage,
                "{}: input shape {}", describe(), shapeString(x.shape));
  const int n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  const int ho = (h - k_) / stride_ + 1, wo = (w - k_) / stride_ + 1;
  inShape_ = x.shape;
  y_.resize({n, c, ho, wo});
  argmax_.resize(y_.numel());
  size_t out = 0;
  for (int plane = 0; plane < n * c; ++plane) {
    const size_t base = static_cast<size_t>(plane) * h * w;
    for (int oh = 0; oh < ho; ++oh) {
      for (int ow = 0; ow < wo; ++ow, ++out) {
        size_t best = base + static_cast<size_t>(oh * stride_) * w + ow * stride_;
        for (int i = 0; i < k_; ++i) {
          for (int j = 0; j < k_; ++j) {
            size_t idx = base + static_cast<size_t>(oh * stride_ + i) * w + ow * stride_ + j;
            if (x.data[idx] > x.data[best]) best = idx;
          }
        }
        argmax_[out] = static_cast<uint32_t>(best);
        y_.data[out] = x.data[best];
      }
    }
  }
  return y_;
}

const Tensor& MaxPool2d::backward(const Tensor& dy) {
  BRAID_ENFORCE(dy.shape == y_.shape, ErrorCode::kInvalidUsage,
                "{}: backward with dy {} after forward output {}", describe(),
                shapeString(dy.shape), shapeString(y_.shape));
  dx_.resize(inShape_);
  std::fill(dx_.data.begin(), dx_.data.end(), 0.0f);
  for (size_t i = 0; i < dy.numel(); ++i) dx_.data[argmax_[i]] += dy.data[i];
  return dx_;
}

std::string MaxPool2d::describe() const { return fmt::format("MaxPool2d(k{}, s{})", k_, stride_); }

const Tensor& GlobalAvgPool::forward(const Tensor& x) {
  BRAID_ENFORCE(x.shape.size() == 4, ErrorCode::kInvalidUsage, "GlobalAvgPool: input shape {}",
                shapeString(x.shape));
  const int n = x.dim(0), c = x.dim(1);
  const size_t hw = static_cast<size_t>(x.dim(2)) * x.dim(3);
  inShape_ = x.shape;
  y_.resize({n, c});
  for (int plane = 0; plane < n * c; ++plane) {
    const float* p = x.ptr() + plane * hw;
    float sum = 0.0f;
    for (size_t i = 0; i < hw; ++i) sum += p[i];
    y_.data[plane] = sum / static_cast<float>(hw);
  }
  return y_;
}

const Tensor& GlobalAvgPool::backward(const Tensor& dy) {
  BRAID_ENFORCE(dy.shape == y_.shape, ErrorCode::kInvalidUsage,
                "GlobalAvgPool: backward with dy {} after forward output {}", shapeString(dy.shape),
                shapeString(y_.shape));
  dx_.resize(inShape_);
  const size_t hw = static_cast<size_t>(inShape_[2]) * inShape_[3];
  for (size_t plane = 0; plane < dy.numel(); ++plane) {
    const float g = dy.data[plane] / static_cast<float>(hw);
    std::fill(dx_.ptr() + plane * hw, dx_.ptr() + (plane + 1) * hw, g);
  }
  return dx_;
}

const Tensor& Flatten::forward(const Tensor& x) {
  BRAID_ENFORCE(!x.shape.empty(), ErrorCode::kInvalidUsage, "Flatten: scalar input");
  inShape_ = x.shape;
  y_.shape = {x.dim(0), static_cast<int>(x.perSample())};
  y_.data = x.data;
  return y_;
}

const Tensor& Flatten::backward(const Tensor& dy) {
  BRAID_ENFORCE(dy.shape == y_.shape, ErrorCode::kInvalidUsage,
                "Flatten: backward with dy {} after forward output {}", shapeString(dy.shape),
                shapeString(y_.shape));
  dx_.shape = inShape_;
  dx_.data = dy.data;
  return dx_;
}

}  // namespace braid::trainer
