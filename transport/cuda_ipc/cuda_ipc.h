// CUDA IPC transport: channels whose slots are device memory. Each rank owns an inbox (one
// cudaMalloc: channels x K slots per peer) that its peers write with kernels; processes reach it
// through cudaIpcGetMemHandle/cudaIpcOpenMemHandle, threads of the same process through the raw
// pointer (cudaIpcOpenMemHandle refuses handles of its own process). Counters and headers live in
// one host shared-memory segment per job (control.h), so ready/free signalling works between
// processes and threads alike, with the same doorbell sleep as shm.
//
// Pointers from tryAcquire()/tryPeek() are DEVICE pointers. The caller must have finished the
// kernels that fill a slot before post(), and those that read a slot before release() (the
// device executor waits on its stream first); then the host counters order the device memory.
//
// Several ranks on one GPU work (processes or threads). All ranks of the endpoint must be on one
// host. Thread-safety as transport.h: one thread per endpoint, signalAbort() from any thread.
#pragma once

#include <memory>

#include "transport/transport.h"

namespace braid::transport::cuda_ipc {

/// The Kind this transport reports for its peers, until transport.h names it (Kind::kCudaIpc).
inline constexpr Kind kKind = Kind::kCudaIpc;

/// Connects this rank to every other rank of `config` over CUDA IPC. `device` is the CUDA device
/// ordinal this rank's inbox and kernels use. config.peerKinds is ignored (every peer is CUDA
/// IPC). Collective over all ranks; it calls kv.set() for its own record before any kv.get(), so
/// a store that exchanges on the first get works. Throws Error: kCudaError (a CUDA call failed,
/// naming it), kSystemError (shared memory), kTimeout (a peer's record never came), kInternal
/// (a malformed or inconsistent peer record).
std::unique_ptr<Endpoint> connect(const EndpointConfig& config, int device, KeyValue& kv);

/// Opens `handle` (kIpcHandleBytes) from another process on the current device, reusing an
/// existing mapping of the same handle in this process (reference-counted; several thread-ranks
/// of one process may open the same peer's inbox). Throws kCudaError.
void* openIpcHandle(const void* handle, int rank, int peer);
/// Drops one reference taken by openIpcHandle(); unmaps on the last.
void closeIpcHandle(void* ptr);

}  // namespace braid::transport::cuda_ipc
