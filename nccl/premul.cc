// ncclRedOpCreatePreMulSum / ncclRedOpDestroy and the scaling they ask for.
#include "premul.h"

#include <fmt/format.h>

#include <cstring>
#include <type_traits>

#include "errors.h"
#include "export.h"
#include "kernels/kernels.h"
#include "memory.h"
#include "vocabulary.h"

namespace braid::nccl {
namespace {

double readScalar(const void* at, DataType type) {
  return visitDataType(type, [&](auto zero) -> double {
    using T = decltype(zero);
    T value;
    std::memcpy(&value, at, sizeof value);
    if constexpr (std::is_same_v<T, Float16Storage>) {
      return kernels::halfToFloat(value.bits);
    } else if constexpr (std::is_same_v<T, BFloat16Storage>) {
      return kernels::bfloat16ToFloat(value.bits);
    } else {
      return double(value);
    }
  });
}

}  // namespace

double scalarOf(const PreMulSum& op) {
  return op.scalarAt != nullptr ? readScalar(op.scalarAt, op.type) : op.scalar;
}

const void* scaleInto(std::vector<char>& out, const void* in, size_t count, DataType type,
                      double scalar) {
  out.resize(count * dataTypeSize(type) + 1);
  visitDataType(type, [&](auto zero) {
    using T = decltype(zero);
    const T* src = static_cast<const T*>(in);
    T* dst = reinterpret_cast<T*>(out.data());
    for (size_t i = 0; i < count; ++i) {
      if constexpr (std::is_same_v<T, Float16Storage>) {
        dst[i].bits = kernels::floatToHalf(float(kernels::halfToFloat(src[i].bits) * scalar));
      } else if constexpr (std::is_same_v<T, BFloat16Storage>) {
        dst[i].bits =
            kernels::floatToBfloat16(float(kernels::bfloat16ToFloat(src[i].bits) * scalar));
      } else {
        dst[i] = T(src[i] * scalar);
      }
    }
  });
  return out.data();
}

}  // namespace braid::nccl

using namespace braid::nccl;

extern "C" ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar,
                                                 ncclDataType_t datatype,
                                                 ncclScalarResidence_t residence,
                                                 ncclComm_t comm) {
  return guard([&] {
    constexpr const char* kCall = "ncclRedOpCreatePreMulSum";
    CommRef ref(comm, kCall);
    if (op == nullptr || scalar == nullptr) argumentError("ncclRedOpCreatePreMulSum: op or scalar is NULL");
    PreMulSum made;
    made.type = dataTypeOf(datatype, kCall);
    if (residence == ncclScalarHostImmediate) {
      made.scalar = readScalar(scalar, made.type);
    } else if (residence == ncclScalarDevice) {
      if (isDeviceMemory(scalar)) {
        fail(braid::ErrorCode::kInvalidUsage,
             "rank {}: {}: a scalar in device memory is not implemented by braid (PreMulSum runs "
             "on host buffers only; pass ncclScalarHostImmediate)",
             ref->settings.rank, kCall);
      }
      made.scalarAt = scalar;
    } else {
      argumentError(fmt::format("{}: unknown scalar residence {}", kCall, int(residence)));
    }
    *op = ref->addPreMulSum(made);
  });
}
BRAID_NCCL_ALIAS(ncclRedOpCreatePreMulSum)

extern "C" ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return guard([&] {
    CommRef ref(comm, "ncclRedOpDestroy");
    if (int(op) < ncclNumOps) {
      argumentError(fmt::format("ncclRedOpDestroy: op {} is a built-in op", int(op)));
    }
    ref->removePreMulSum(op, "ncclRedOpDestroy");
  });
}
BRAID_NCCL_ALIAS(ncclRedOpDestroy)
