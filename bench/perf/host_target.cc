// The host target: page-aligned, pre-touched host buffers (from braid::memAlloc with -R 1/2);
// ops through the Communicator.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/perf/target.h"
#include "braid/deadline.hpp"
#include "common/error.h"

namespace braid::bench {
namespace {

class HostTarget final : public Target {
 public:
  HostTarget(World& world, const CollRunner& runner, bool blocking, double timeoutSeconds,
             bool shared)
      : world_(world),
        runner_(runner),
        blocking_(blocking),
        timeoutSeconds_(timeoutSeconds),
        shared_(shared) {}
  ~HostTarget() override {
    for (void* p : buffers_) shared_ ? memFree(p) : std::free(p);
  }

  void* allocate(size_t bytes) override {
    // Touched up front, so page faults stay out of the timings.
    constexpr size_t kPage = 4096;
    const size_t rounded = (std::max<size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
    void* p = shared_ ? memAlloc(rounded) : std::aligned_alloc(kPage, rounded);
    BRAID_ENFORCE(p != nullptr, ErrorCode::kSystemError, "rank {}: cannot allocate {} bytes",
                  world_.rank(), rounded);
    std::memset(p, 0, rounded);
    buffers_.push_back(p);
    return p;
  }
  void* hostView(void* p) override { return p; }
  void upload(void*, size_t) override {}
  void download(void*, size_t) override {}

  void runOnce(const OpArgs& a) override {
    if (blocking_) {
      runner_.run(world_.comm(), a.send, a.recv, a.count, a.type, a.op, a.root);
    } else {
      Request request = runner_.start(world_.comm(), a.send, a.recv, a.count, a.type, a.op, a.root);
      request.wait(Deadline::after(timeoutSeconds_));
    }
  }

  double timeOps(const OpArgs& a, int iters) override {
    const auto start = std::chrono::steady_clock::now();
    if (blocking_) {
      for (int i = 0; i < iters; ++i) {
        runner_.run(world_.comm(), a.send, a.recv, a.count, a.type, a.op, a.root);
      }
    } else {
      std::vector<Request> requests;
      requests.reserve(iters);
      for (int i = 0; i < iters; ++i) {
        requests.push_back(
            runner_.start(world_.comm(), a.send, a.recv, a.count, a.type, a.op, a.root));
      }
      // Each op ends by its own timeout (no progress for BRAID_TIMEOUT fails it), which bounds
      // these waits; a deadline per wait would cost a clock read per op in the timing.
      for (auto& request : requests) request.wait();
    }
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    return elapsed.count() / iters;
  }

  std::string describe() const override { return "host"; }
  int deviceNumber() const override { return localRank(); }
  std::string deviceLabel() const override {
    return shared_ ? "[cpu] host memory from braid::memAlloc (-R)" : "[cpu] host memory";
  }

 private:
  World& world_;
  const CollRunner& runner_;
  const bool blocking_;
  const double timeoutSeconds_;
  const bool shared_;
  std::vector<void*> buffers_;
};

}  // namespace

std::unique_ptr<Target> makeHostTarget(World& world, const CollRunner& runner, bool blocking,
                                       double timeoutSeconds, bool shared) {
  return std::make_unique<HostTarget>(world, runner, blocking, timeoutSeconds, shared);
}

}  // namespace braid::bench
