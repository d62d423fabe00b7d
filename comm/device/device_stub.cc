// DeviceCommunicator in builds without CUDA: creation says so; nothing else can be reached.
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

}  // namespace braid
