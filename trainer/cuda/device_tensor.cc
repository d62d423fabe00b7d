#include "trainer/cuda/device_tensor.h"

#include "trainer/cuda/cuda_check.h"
#include "trainer/cuda/kernels.h"

namespace braid::trainer::cuda {

void DeviceTensor::resize(const std::vector<int>& dims, const CudaContext& ctx) {
  shape = dims;
  storage.resize(shapeNumel(dims), "activation");
  if (ctx.options().poisonOutputs && numel() > 0) {
    fillFloats(ptr(), numel(), __builtin_nanf(""), ctx.stream());
  }
}

void upload(const Tensor& host, DeviceTensor& device, const CudaContext& ctx) {
  device.shape = host.shape;
  device.storage.resize(host.numel(), "input");
  copyToDevice(device.ptr(), host.ptr(), host.numel(), ctx.stream());
}

Tensor download(const DeviceTensor& device, const CudaContext& ctx) {
  Tensor host(device.shape);
  copyToHost(host.ptr(), device.ptr(), host.numel(), ctx.stream());
  ctx.synchronize();
  return host;
}

}  // namespace braid::trainer::cuda
