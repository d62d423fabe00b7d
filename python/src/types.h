// PyTorch dtypes and reduce ops in braid's terms, with the errors for those braid lacks.
#pragma once

#include <ATen/ATen.h>

#include <torch/csrc/distributed/c10d/Types.hpp>

#include "braid/types.hpp"

namespace braid::pytorch {

/// braid's element type for `dtype`, or throws (Python RuntimeError) naming `opName` and the
/// dtype. bool maps to uint8; with a reduction only max and min (logical or, and) accept it.
DataType toDataType(at::ScalarType dtype, const char* opName, bool reduces = false,
                    RedOp op = RedOp::kSum);

/// braid's op for a c10d ReduceOp (SUM, AVG, PRODUCT, MIN, MAX); throws NotImplementedError for
/// the bitwise ops and PREMUL_SUM, naming `opName`.
RedOp toRedOp(const ::c10d::ReduceOp& op, const char* opName);

/// Checks what every braid collective needs of a tensor: CPU (or CUDA where `cudaOk`: the ops
/// of cuda_path.h), strided (dense). Names `opName`.
void checkTensor(const at::Tensor& tensor, const char* opName, bool cudaOk = false);
/// The ops that take CUDA tensors, for error messages.
extern const char* const kCudaOps;

}  // namespace braid::pytorch
