// The ucx backend of a build without UCX (transport/CMakeLists.txt compiles this file instead of
// transport/ucx/backend.cc): listed, never available, and says what to install.
#include "common/error.h"
#include "transport/backend.h"

namespace braid::transport {
namespace {

class MissingUcxBackend final : public Backend {
 public:
  Kind kind() const override { return Kind::kUcx; }
  bool available(std::string* why) const override {
    if (why != nullptr) {
      *why =
          "this build has no UCX transport (configure found no UCX: apt-get install libucx-dev, "
          "then reconfigure with BRAID_WITH_UCX=AUTO or ON)";
    }
    return false;
  }
  bool canReach(const HostInfo&, const HostInfo&) const override { return false; }
  std::unique_ptr<BackendEndpoint> open(const EndpointConfig& config, KeyValue&) const override {
    std::string why;
    available(&why);
    fail(ErrorCode::kInvalidUsage, "rank {}: transport connect: {}", config.rank, why);
  }
};

}  // namespace

const Backend& ucxBackend() {
  static const MissingUcxBackend backend;
  return backend;
}

}  // namespace braid::transport
