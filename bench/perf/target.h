// Where a *_perf run's buffers live and how its ops run there: host memory through Communicator
// (blocking or non-blocking API), or CUDA device memory through DeviceCommunicator on one stream
// (--device cuda). The driver fills and checks buffers through hostView() and moves them with
// upload()/download(), which are no-ops on the host.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "bench/perf/args.h"
#include "bench/perf/driver.h"
#include "bench/perf/world.h"

namespace braid::bench {

/// One op's arguments (root and op are ignored where the collective has none).
struct OpArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = 0;
};

class Target {
 public:
  virtual ~Target() = default;
  /// A zeroed buffer of `bytes` the ops read and write; the target owns it.
  virtual void* allocate(size_t bytes) = 0;
  /// Where to fill or read the bytes of `p` (a pointer into an allocate()d buffer) on the host.
  virtual void* hostView(void* p) = 0;
  /// Makes the ops see what was written to hostView(p) for `bytes` bytes.
  virtual void upload(void* p, size_t bytes) = 0;
  /// Makes hostView(p) show what the ops wrote there.
  virtual void download(void* p, size_t bytes) = 0;
  /// One op, finished on return.
  virtual void runOnce(const OpArgs& op) = 0;
  /// Seconds per op of `iters` back-to-back ops, finished on return.
  virtual double timeOps(const OpArgs& op, int iters) = 0;
  /// "host" or "cuda device N", for the preamble.
  virtual std::string describe() const = 0;
  /// This rank's device for nccl-tests' "Using devices" lines: its number and its label
  /// ("[cpu] host memory", or "[0x06] NVIDIA H200": PCI bus id and name).
  virtual int deviceNumber() const = 0;
  virtual std::string deviceLabel() const = 0;
};

/// Host buffers, ops through world.comm() with runner's blocking or non-blocking entry.
/// `shared`: buffers from braid::memAlloc (-R 1/2), else ordinary page-aligned memory.
std::unique_ptr<Target> makeHostTarget(World& world, const CollRunner& runner, bool blocking,
                                       double timeoutSeconds, bool shared);
/// Device buffers on GPU LOCAL_RANK % device count, ops through a DeviceCommunicator made over
/// world.comm(). Throws kInvalidUsage in a build without CUDA, kCudaError without a device.
std::unique_ptr<Target> makeCudaTarget(World& world, const CollInfo& info, const Options& options);

}  // namespace braid::bench
