// DeviceCommunicator in builds without CUDA: creation says so; nothing else can be reached (no
// object can exist), but every member is defined, so that programs calling them (libnccl.so.2's
// device path) link against any braid.
#include "braid/braid.hpp"
#include "common/error.h"

namespace braid {

struct DeviceCommState {};

DeviceCommunicator DeviceCommunicator::create(Communicator& host, int device, const Options&) {
  fail(ErrorCode::kInvalidUsage,
       "rank {}: device collectives need a braid built with CUDA (this one has none)", host.rank());
}

DeviceCommunicator::DeviceCommunicator(std::shared_ptr<DeviceCommState> state)
    : state_(std::move(state)) {}
DeviceCommunicator::DeviceCommunicator(DeviceCommunicator&&) noexcept = default;
DeviceCommunicator& DeviceCommunicator::operator=(DeviceCommunicator&&) noexcept = default;
DeviceCommunicator::~DeviceCommunicator() = default;

namespace {
[[noreturn]] void noDevice(const char* what) {
  fail(ErrorCode::kInvalidUsage,
       "DeviceCommunicator::{}: device collectives need a braid built with CUDA (this one has "
       "none)",
       what);
}
}  // namespace

int DeviceCommunicator::rank() const { noDevice("rank"); }
int DeviceCommunicator::size() const { noDevice("size"); }
int DeviceCommunicator::device() const { noDevice("device"); }
void DeviceCommunicator::allReduce(const void*, void*, size_t, DataType, RedOp, CudaStream) {
  noDevice("allReduce");
}
void DeviceCommunicator::reduceScatter(const void*, void*, size_t, DataType, RedOp, CudaStream) {
  noDevice("reduceScatter");
}
void DeviceCommunicator::allGather(const void*, void*, size_t, DataType, CudaStream) {
  noDevice("allGather");
}
void DeviceCommunicator::broadcast(const void*, void*, size_t, DataType, int, CudaStream) {
  noDevice("broadcast");
}
void DeviceCommunicator::reduce(const void*, void*, size_t, DataType, RedOp, int, CudaStream) {
  noDevice("reduce");
}
void DeviceCommunicator::send(const void*, size_t, DataType, int, CudaStream) { noDevice("send"); }
void DeviceCommunicator::recv(void*, size_t, DataType, int, CudaStream) { noDevice("recv"); }
void DeviceCommunicator::allToAll(const void*, void*, size_t, DataType, CudaStream) {
  noDevice("allToAll");
}
void DeviceCommunicator::allToAllv(const void*, const size_t*, const size_t*, void*, const size_t*,
                                   const size_t*, DataType, CudaStream) {
  noDevice("allToAllv");
}
void DeviceCommunicator::gather(const void*, void*, size_t, DataType, int, CudaStream) {
  noDevice("gather");
}
void DeviceCommunicator::scatter(const void*, void*, size_t, DataType, int, CudaStream) {
  noDevice("scatter");
}
ErrorCode DeviceCommunicator::asyncError() const { noDevice("asyncError"); }
void DeviceCommunicator::checkAsyncError() const { noDevice("checkAsyncError"); }
void DeviceCommunicator::synchronize() { noDevice("synchronize"); }
void DeviceCommunicator::abort() { noDevice("abort"); }

}  // namespace braid
