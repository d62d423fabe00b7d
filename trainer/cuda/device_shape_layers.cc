#include "trainer/cuda/device_shape_layers.h"

#include "trainer/cuda/cuda_check.h"
#include "trainer/cuda/kernels.h"

namespace braid::trainer::cuda {

void copyTensor(const DeviceTensor& src, DeviceTensor& dst, const std::vector<int>& shape,
                const CudaContext& ctx) {
  dst.resize(shape, ctx);
  BRAID_ENFORCE(dst.numel() == src.numel(), ErrorCode::kInternal, "device copy of {} into shape {}",
                shapeString(src.shape), shapeString(shape));
  BRAID_CUDA_CHECK(cudaMemcpyAsync(dst.ptr(), src.ptr(), src.numel() * sizeof(float),
                                   cudaMemcpyDeviceToDevice, ctx.stream()),
                   "device copy of {}", shapeString(src.shape));
}

const DeviceTensor& DeviceRelu::forward(const DeviceTensor& x) {
  y_.resize(x.shape, ctx_);
  reluForward(x.ptr(), y_.ptr(), x.numel(), ctx_.stream());
  return y_;
}

const DeviceTensor& DeviceRelu::backward(const DeviceTensor& dy) {
  BRAID_ENFORCE(dy.shape == y_.shape, ErrorCode::kInvalidUsage,
                "device ReLU: backward with dy {} after forward output {}", shapeString(dy.shape),
                shapeString(y_.shape));
  dx_.resize(dy.shape, ctx_);
  reluBackward(y_.ptr(), dy.ptr(), dx_.ptr(), dy.numel(), ctx_.stream());
  return dx_;
}

const DeviceTensor& DeviceFlatten::forward(const DeviceTensor& x) {
  BRAID_ENFORCE(!x.shape.empty(), ErrorCode::kInvalidUsage, "device Flatten: scalar input");
  inShape_ = x.shape;
  copyTensor(x, y_, {x.dim(0), static_cast<int>(x.perSample())}, ctx_);
  return y_;
}

const DeviceTensor& DeviceFlatten::backward(const DeviceTensor& dy) {
  BRAID_ENFORCE(dy.shape == y_.shape, ErrorCode::kInvalidUsage,
                "device Flatten: backward with dy {} after forward output {}",
                shapeString(dy.shape), shapeString(y_.shape));
  copyTensor(dy, dx_, inShape_, ctx_);
  return dx_;
}

const DeviceTensor& DeviceGlobalAvgPool::forward(const DeviceTensor& x) {
  BRAID_ENFORCE(x.shape.size() == 4, ErrorCode::kInvalidUsage,
                "device GlobalAvgPool: input shape {}", shapeString(x.shape));
  inShape_ = x.shape;
  y_.resize({x.dim(0), x.dim(1)}, ctx_);
  globalAvgPoolForward(x.ptr(), y_.ptr(), y_.numel(), static_cast<size_t>(x.dim(2)) * x.dim(3),
                       ctx_.stream());
  return y_;
}

const DeviceTensor& DeviceGlobalAvgPool::backward(const DeviceTensor& dy) {
  BRAID_ENFORCE(dy.shape == y_.shape, ErrorCode::kInvalidUsage,
                "device GlobalAvgPool: backward with dy {} after forward output {}",
                shapeString(dy.shape), shapeString(y_.shape));
  dx_.resize(inShape_, ctx_);
  globalAvgPoolBackward(dy.ptr(), dx_.ptr(), dy.numel(),
                        static_cast<size_t>(inShape_[2]) * inShape_[3], ctx_.stream());
  return dx_;
}

}  // namespace braid::trainer::cuda
