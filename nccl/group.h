// Group semantics (ncclGroupStart/ncclGroupEnd), per thread as NCCL's: inside a group, calls
// are queued; the outermost ncclGroupEnd first makes the communicators whose init was called in
// the group (each on a thread of its own: they may be ranks of one communicator), then posts
// every host op without waiting (braid's async calls: sends and recvs posted together progress
// together, so a ring of pairs never deadlocks) and enqueues every device op, then waits for
// the host ops. Outside a group an op runs at once. Sends to and receives from the rank itself
// pair up in posting order at the group's end (Op::self).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "braid/braid.hpp"
#include "comm.h"

namespace braid::nccl {

/// One collective or send/recv, ready to run on either path.
struct Op {
  CommRef comm;
  const char* call = "";
  bool onDevice = false;
  std::function<Request(Communicator&)> postHost;            ///< the host path (async call)
  std::function<void(DeviceCommunicator&, CudaStream)> enqueueDevice;
  CudaStream stream;
  std::shared_ptr<void> scratch;  ///< what the op reads besides the caller's buffers (PreMulSum)
  /// A send to or receive from this rank itself (PyTorch's all-to-all posts such pairs): only
  /// inside a group, where the k-th send to itself and the k-th receive from itself become one
  /// copy at the group's end (on the receive's stream for device buffers).
  struct Self {
    bool send = false;
    void* buf = nullptr;
    size_t bytes = 0;
  };
  std::optional<Self> self;
};

/// True between the outermost ncclGroupStart and its ncclGroupEnd on this thread.
bool inGroup();
/// Runs `op` now (outside a group: host ops return when done) or queues it to the group's end.
/// A failure is also kept as the communicator's asynchronous error.
void submit(Op op);
/// Queues a communicator's deferred init (inside a group).
void deferInit(CommRef comm);
/// Queues a destroy to the group's end (after the group's ops).
void deferDestroy(ncclComm_t comm);
/// Drops the group's queued ops of an aborted communicator.
void forgetOps(ncclComm_t comm);

}  // namespace braid::nccl
