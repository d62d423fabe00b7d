// PreMulSum: each rank multiplies its input by its scalar into a temporary, then the collective
// sums the temporaries. On host buffers the temporary is a vector made when the op runs; on
// device buffers it is device memory allocated, scaled and freed on the op's stream, around the
// collective (DeviceInput).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "comm.h"

namespace braid::nccl {

/// The op's scalar now (read through scalarAt for ncclScalarDevice residence).
double scalarOf(const PreMulSum& op);
/// Fills `out` with `count` elements of `in` times `scalar`, converted as `type` converts;
/// returns out.data().
const void* scaleInto(std::vector<char>& out, const void* in, size_t count, DataType type,
                      double scalar);

/// The input a device op reads: `send` itself, or its scaled copy made on `stream` (the scalar
/// read by the kernel when it is in device memory, else now); freed on the stream when this goes,
/// after the collective that reads it was enqueued.
class DeviceInput {
 public:
  DeviceInput(const void* send, size_t count, DataType type, const std::optional<PreMulSum>& op,
              void* stream);
  ~DeviceInput();
  DeviceInput(const DeviceInput&) = delete;
  DeviceInput& operator=(const DeviceInput&) = delete;
  const void* get() const { return scaled_ != nullptr ? scaled_ : send_; }

 private:
  const void* send_;
  void* scaled_ = nullptr;
  void* stream_;
};

}  // namespace braid::nccl
