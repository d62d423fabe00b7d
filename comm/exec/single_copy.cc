// Single-copy all-reduce (single_copy.h).
#include "comm/exec/single_copy.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "kernels/kernels.h"
#include "transport/peer_memory.h"

namespace braid::comm {
namespace {

// Bytes of each peer's share read per pass: small enough that the n-1 blocks and the result stay
// in the core's caches until they are written out, large enough that a system call moves a lot.
constexpr size_t kBlockBytes = 256 << 10;
constexpr size_t kLine = 64;

[[noreturn]] void failPeer(const ProgramRunner& runner, const ExecArgs& args, int peer,
                           const PeerBuffers& p, bool reading, size_t bytes, int err) {
  fail(err == ESRCH ? ErrorCode::kRemoteError : ErrorCode::kSystemError,
       "rank {}: {}: single copy: {} {} bytes of peer rank {}'s {} (pid {}) failed: {}{}",
       runner.rank(), runner.what(args), reading ? "reading" : "writing", bytes, peer,
       reading ? "input" : "output", p.pid, std::strerror(err),
       err == ESRCH ? " (its process is gone)" : "");
}

}  // namespace

void SingleCopy::share(size_t count, size_t elemSize, int n, int r, size_t* lo, size_t* hi) {
  const size_t unit = std::max<size_t>(1, kLine / elemSize);
  const size_t units = (count + unit - 1) / unit;
  const size_t per = (units + n - 1) / n * unit;
  *lo = std::min(count, per * r);
  *hi = std::min(count, per * (r + 1));
}

void SingleCopy::run(const ProgramRunner& runner, const ExecArgs& args, size_t count, int rank,
                     const std::vector<PeerBuffers>& peers) {
  const int n = static_cast<int>(peers.size());
  const size_t elem = dataTypeSize(args.dtype);
  size_t lo, hi;
  share(count, elem, n, rank, &lo, &hi);
  if (lo >= hi) return;
  const size_t unit = std::max<size_t>(1, kLine / elem);
  const size_t blockElems = std::max(unit, kBlockBytes / elem / unit * unit);
  int remote = 0;
  for (int q = 0; q < n; ++q) remote += (q != rank && !peers[q].sameProcess);
  if (scratch_.size() < size_t(remote) * blockElems * elem) {
    scratch_.resize(size_t(remote) * blockElems * elem);
  }
  const RedOp op = args.op == RedOp::kAvg ? RedOp::kSum : args.op;
  char* out = reinterpret_cast<char*>(peers[rank].output);
  std::vector<const void*> srcs(n);
  for (size_t b = lo; b < hi; b += blockElems) {
    const size_t len = std::min(blockElems, hi - b);
    const size_t off = b * elem, bytes = len * elem;
    // Every rank's input block, in rank order (the same sum on every rank's share).
    int slot = 0;
    for (int q = 0; q < n; ++q) {
      const PeerBuffers& p = peers[q];
      if (q == rank || p.sameProcess) {
        srcs[q] = reinterpret_cast<const char*>(p.input) + off;
        continue;
      }
      char* into = scratch_.data() + size_t(slot++) * blockElems * elem;
      const int err = transport::readPeerMemory(p.pid, reinterpret_cast<const char*>(p.input) + off,
                                                into, bytes);
      if (err != 0) failPeer(runner, args, q, p, true, bytes, err);
      srcs[q] = into;
    }
    kernels::reduceMany(out + off, srcs.data(), n, len, args.dtype, op);
    if (args.op == RedOp::kAvg) kernels::divide(out + off, out + off, len, args.dtype, n);
    for (int q = 0; q < n; ++q) {
      if (q == rank) continue;
      const PeerBuffers& p = peers[q];
      char* theirs = reinterpret_cast<char*>(p.output) + off;
      if (p.sameProcess) {
        std::memcpy(theirs, out + off, bytes);
        continue;
      }
      const int err = transport::writePeerMemory(p.pid, out + off, theirs, bytes);
      if (err != 0) failPeer(runner, args, q, p, false, bytes, err);
    }
  }
}

}  // namespace braid::comm
