// CUDA IPC transport: the backend (transport/backend.h) whose channels' slots are device memory.
// Each rank owns an inbox (one cudaMalloc: channels x K slots per peer) that its peers write with
// kernels; processes reach it through cudaIpcGetMemHandle/cudaIpcOpenMemHandle, threads of the
// same process through the raw pointer (cudaIpcOpenMemHandle refuses handles of its own process).
// Counters and headers live in one host shared-memory segment per job (control.h), so
// ready/free signalling works between processes and threads alike, with the same doorbell sleep
// as shm; this rank's doorbell there is the Endpoint's.
//
// Pointers from tryAcquire()/tryPeek() are DEVICE pointers. The caller must have finished the
// kernels that fill a slot before post(), and those that read a slot before release() (the
// device piece engine waits on its stream first); then the host counters order the device
// memory.
//
// Several ranks on one GPU work (processes or threads). All peers must be on this host, and an
// endpoint with cuda_ipc peers has no others (transport::connect refuses mixing device and host
// memory). Thread-safety as transport.h: one thread per endpoint, signalAbort() from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/backend.h"
#include "transport/cuda_ipc/control.h"
#include "transport/cuda_ipc/record.h"

namespace braid::transport::cuda_ipc {

/// The peers of one endpoint over CUDA IPC, on the CUDA device config.device.
class CudaIpcTransport final : public BackendEndpoint {
 public:
  /// Step one (backend.h): makes the inbox (and, rank 0, the control segment) and publishes this
  /// rank's record. Throws kInvalidUsage (no device, bad geometry), kCudaError naming the call,
  /// kSystemError (shared memory).
  CudaIpcTransport(const EndpointConfig& config, KeyValue& kv);
  ~CudaIpcTransport() override;

  Kind kind() const override { return Kind::kCudaIpc; }
  /// This rank's doorbell in the control segment (after connectPeers).
  Doorbell* ownDoorbell() override;
  /// Reads every peer's record (kTimeout naming a missing one; kInternal for a different
  /// geometry), maps the control segment and the peers' inboxes, builds the channels.
  void connectPeers(KeyValue& kv, Deadline deadline) override;
  void start(Doorbell* doorbell) override { (void)doorbell; }  // peers ring ownDoorbell()
  SendChannel& send(int peer, int channel) override;
  RecvChannel& recv(int peer, int channel) override;
  bool peerAlive(int peer) override;
  void signalAbort(const std::string& reason) override;
  std::optional<std::pair<int, std::string>> peerAbort() override;

 private:
  size_t index(int peer, int channel) const;
  RankControl* self() { return layout_.rank(segment_, rank_); }
  void cleanup();

  int rank_, size_, channels_, slots_, device_;
  size_t slotBytes_;
  Layout layout_;
  std::string segmentName_;
  void* segment_ = nullptr;
  size_t segmentBytes_ = 0;
  void* inbox_ = nullptr;
  PeerRecord mine_;            // this rank's record
  std::string keyPrefix_;      // of the records in the key-value store
  std::vector<void*> opened_;  // peer inboxes mapped through IPC handles
  std::vector<std::unique_ptr<SendChannel>> sends_;
  std::vector<std::unique_ptr<RecvChannel>> recvs_;
  std::vector<uint64_t> peerPids_;
  std::vector<bool> peerSameProcess_;
};

/// Opens `handle` (kIpcHandleBytes) from another process on the current device, reusing an
/// existing mapping of the same handle in this process (reference-counted; several thread-ranks
/// of one process may open the same peer's inbox). Throws kCudaError.
void* openIpcHandle(const void* handle, int rank, int peer);
/// Drops one reference taken by openIpcHandle(); unmaps on the last.
void closeIpcHandle(void* ptr);

}  // namespace braid::transport::cuda_ipc
