#include "types.h"

namespace braid::pytorch {

DataType toDataType(at::ScalarType dtype, const char* opName, bool reduces, RedOp op) {
  switch (dtype) {
    case at::kFloat:
      return DataType::kFloat32;
    case at::kDouble:
      return DataType::kFloat64;
    case at::kHalf:
      return DataType::kFloat16;
    case at::kBFloat16:
      return DataType::kBFloat16;
    case at::kChar:
      return DataType::kInt8;
    case at::kByte:
      return DataType::kUint8;
    case at::kInt:
      return DataType::kInt32;
    case at::kLong:
      return DataType::kInt64;
    case at::kBool:
      // 0/1 bytes: max is logical or, min logical and; a sum or product could leave a byte
      // that is not a valid bool.
      TORCH_CHECK(!reduces || op == RedOp::kMax || op == RedOp::kMin, "braid ", opName,
                  ": bool tensors reduce only with MAX (or) and MIN (and), not ", redOpName(op));
      return DataType::kUint8;
    default:
      break;
  }
  TORCH_CHECK(false, "braid ", opName, ": dtype ", at::toString(dtype),
              " is not supported by braid (supported: float32, float64, float16, bfloat16, "
              "int8, uint8, int32, int64, and bool without sum/product)");
}

RedOp toRedOp(const ::c10d::ReduceOp& op, const char* opName) {
  switch (op.op_) {
    case ::c10d::ReduceOp::SUM:
      return RedOp::kSum;
    case ::c10d::ReduceOp::AVG:
      return RedOp::kAvg;
    case ::c10d::ReduceOp::PRODUCT:
      return RedOp::kProd;
    case ::c10d::ReduceOp::MIN:
      return RedOp::kMin;
    case ::c10d::ReduceOp::MAX:
      return RedOp::kMax;
    default:
      break;
  }
  const char* name = op.op_ == ::c10d::ReduceOp::BAND   ? "BAND"
                     : op.op_ == ::c10d::ReduceOp::BOR  ? "BOR"
                     : op.op_ == ::c10d::ReduceOp::BXOR ? "BXOR"
                                                        : "PREMUL_SUM";
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "braid ", opName, ": reduce op ", name,
      " is not supported by braid (supported: SUM, AVG, PRODUCT, MIN, MAX)");
}

const char* const kCudaOps =
    "allreduce, allreduce_coalesced, broadcast, reduce, allgather, _allgather_base, "
    "_reduce_scatter_base, the tensor-coalesced forms, alltoall_base, alltoall, gather and "
    "scatter";

void checkTensor(const at::Tensor& tensor, const char* opName, bool cudaOk) {
  TORCH_CHECK(tensor.defined(), "braid ", opName, ": undefined tensor");
  const at::Device device = tensor.device();
  TORCH_CHECK(device.is_cpu() || device.is_cuda(), "braid ", opName, ": tensor is on ", device,
              "; ", device.type(), " tensors are not supported by braid yet (CPU tensors are, and "
              "CUDA tensors in ", kCudaOps, "): move them with .cpu()");
  TORCH_CHECK(device.is_cpu() || cudaOk, "braid ", opName, ": tensor is on ", device, "; braid's ",
              opName, " takes CPU tensors (CUDA tensors go to ", kCudaOps,
              "): move them with .cpu()");
  TORCH_CHECK(tensor.layout() == at::kStrided, "braid ", opName, ": ", tensor.layout(),
              " tensors are not supported by braid (dense tensors only)");
}

}  // namespace braid::pytorch
