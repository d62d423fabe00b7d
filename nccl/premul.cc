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

DeviceInput::DeviceInput(const void* send, size_t count, DataType type,
                         const std::optional<PreMulSum>& op, void* stream)
    : send_(send), stream_(stream) {
  if (!op) return;
  const bool scalarOnDevice = op->scalarAt != nullptr && isDeviceMemory(op->scalarAt);
  scaled_ = scaledOnStream(send, count, type, scalarOnDevice ? 0.0 : scalarOf(*op),
                           scalarOnDevice ? op->scalarAt : nullptr, stream);
}

DeviceInput::~DeviceInput() { freeOnStream(scaled_, stream_); }

const void* scaleInto(std::vector<char>& out, const void* in, size_t count, DataType type,
                      double scalar) {
  out.resize(count * dataTypeSize(type) + 1);
  kernels::scale(out.data(), in, count, type, scalar);
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
      // Read when each collective runs: by the scaling kernel on the stream when it is device
      // memory (device buffers only), else on the host when the op runs (host buffers) or is
      // enqueued (device buffers).
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
