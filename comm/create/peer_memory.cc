// Creation, within connect: whether this communicator may run the single-copy all-reduce
// (comm/exec/single_copy.h), decided alike on every rank. It needs every peer on this host over
// shared memory and every rank able to read every other's memory; the kernel may refuse that
// (transport/peer_memory.h), so each rank publishes its pid, its process token and the address
// of its probe, reads every peer's probe, and publishes what it found; all ranks then read every
// verdict and use the path only if every rank could read every other.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "comm/detail/create.h"
#include "comm/exec/single_copy.h"
#include "common/log.h"
#include "transport/peer_memory.h"

namespace braid::create {

void testPeerMemory(CommState& state, const Plan& plan, transport::KeyValue& kv) {
  const int n = state.size, rank = state.rank;
  if (!state.options.singleCopy) {
    state.singleCopyWhy = "BRAID_SINGLE_COPY=0 turned it off";
    return;
  }
  for (int q = 0; q < n; ++q) {
    if (q != rank && plan.config.peerKinds[q] != transport::Kind::kShm) {
      state.singleCopyWhy = fmt::format("rank {} is reached over {}, not shared memory", q,
                                        transport::kindName(plan.config.peerKinds[q]));
      return;
    }
  }
  const Deadline deadline = Deadline::after(state.options.timeoutSeconds);
  const uint64_t token = transport::processToken();
  kv.set(fmt::format("{}/cma/{}", state.jobId, rank),
         fmt::format("{} {} {}", ::getpid(), token,
                     reinterpret_cast<uintptr_t>(transport::processProbe())));
  std::vector<comm::PeerBuffers> peers(n);
  std::string mine = "ok";
  for (int q = 0; q < n; ++q) {
    if (q == rank) {
      peers[q].pid = ::getpid();
      peers[q].sameProcess = true;
      peers[q].token = token;
      continue;
    }
    const std::string rec = kv.get(fmt::format("{}/cma/{}", state.jobId, q), deadline);
    long long pid = 0;
    unsigned long long theirToken = 0, probe = 0;
    BRAID_ENFORCE(std::sscanf(rec.c_str(), "%lld %llu %llu", &pid, &theirToken, &probe) == 3,
                  ErrorCode::kInternal, "rank {}: rank {}'s single-copy record '{}' is malformed",
                  rank, q, rec);
    peers[q].pid = pid;
    peers[q].sameProcess = theirToken == token;
    peers[q].token = theirToken;
    std::string why;
    if (!peers[q].sameProcess && mine == "ok" &&
        !transport::probePeerMemory(pid, probe, theirToken, &why)) {
      mine = fmt::format("rank {} cannot read rank {}'s memory: {}", rank, q, why);
    }
  }
  kv.set(fmt::format("{}/cma-ok/{}", state.jobId, rank), mine);
  std::string verdict = mine;
  for (int q = 0; q < n; ++q) {
    if (q == rank) continue;
    const std::string theirs = kv.get(fmt::format("{}/cma-ok/{}", state.jobId, q), deadline);
    if (verdict == "ok" && theirs != "ok") verdict = theirs;
  }
  if (verdict != "ok") {
    state.singleCopyWhy = verdict;
    BRAID_INFO("rank {}: no single-copy all-reduce: {}", rank, verdict);
    return;
  }
  // Ranks that are threads of this process touch each other's buffers by address: each lends
  // its own through a lease they all find by (job, rank) (comm/exec/buffer_lease.h).
  for (int q = 0; q < n; ++q) {
    if (q != rank && peers[q].sameProcess) {
      peers[q].lease = comm::BufferLease::of(state.jobId, q);
      if (!state.ownLease) state.ownLease = comm::BufferLease::of(state.jobId, rank);
    }
  }
  state.peersThreads = true;
  for (const comm::PeerBuffers& p : peers) state.peersThreads &= p.sameProcess;
  state.singleCopyPeers = std::move(peers);
  state.singleCopy = std::make_unique<comm::SingleCopy>();
  state.refreshTunerConfig();
}

}  // namespace braid::create
