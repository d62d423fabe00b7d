// Process liveness for the transports that share a host (shm, ucx between local peers,
// cuda_ipc): the one place that asks the kernel whether a peer's process is gone.
#pragma once

#include <cstdint>

namespace braid::transport {

/// Hostname plus boot id, hashed: equal only for processes on one running kernel (ucx and ofi
/// publish it so that peers on this host can be told apart from remote ones).
uint64_t hostId();

/// This process's pid namespace: the inode of /proc/self/ns/pid, 0 when unknown.
uint64_t pidNamespace();

/// Whether the process `pid` of pid namespace `peerPidNamespace` is known to be gone: it does
/// not exist (kill(pid, 0) fails with ESRCH, or its /proc entry vanished while /proc is
/// readable), or it is a zombie ('Z', killed but not reaped by its parent) or dead ('X').
/// A pid of another or an unknown (0) namespace cannot be checked from here (containers sharing
/// /dev/shm): false, so only the caller's timeout catches that peer's death. pid 0 is gone.
bool processGone(uint64_t pid, uint64_t peerPidNamespace);

}  // namespace braid::transport
