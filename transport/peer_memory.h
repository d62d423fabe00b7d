// Single copy between ranks that share a host: reading another process's memory directly
// (Linux cross-memory attach: process_vm_readv; braid never writes into a peer), so a large
// all-reduce reads each peer's input where it lies instead of through slots a core on another
// die just wrote (comm/exec/single_copy.h). The kernel allows it between processes of one user
// unless a security module refuses (Yama's ptrace_scope >= 1, a seccomp profile, another pid
// namespace), so nobody relies on it untested: each process offers a probe (a word holding a
// random token of this process) and a rank tries every local peer's before the communicator
// uses the single-copy path (comm/create/peer_memory.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace braid::transport {

/// Random, drawn once per process (and again in a forked child): names this process among
/// others (a pid alone may mean another process in another pid namespace). Threads of one
/// process share it.
uint64_t processToken();
/// The address of a word in this process holding processToken(): what peers read to test.
const uint64_t* processProbe();

/// Copies `bytes` from `remote` (an address in process `pid`) to `local`. Returns 0 or the
/// errno of the failure (ESRCH: gone; EPERM: not allowed; EFAULT: a bad address). A partial
/// transfer is continued, never reported as done.
int readPeerMemory(int64_t pid, const void* remote, void* local, size_t bytes);

/// Whether this process can read process `pid`'s memory: reads its probe word at `probe` and
/// compares it with `token` (what that process published). False with `why` filled otherwise.
bool probePeerMemory(int64_t pid, uint64_t probe, uint64_t token, std::string* why);

}  // namespace braid::transport
