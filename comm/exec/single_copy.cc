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
// in the core's caches, large enough that a system call moves a lot.
constexpr size_t kBlockBytes = 256 << 10;
constexpr size_t kLine = 64;

// Bytes per pass of the mapped form: its result is copied to the other outputs while it is still
// in the core's L2.
constexpr size_t kMappedBlockBytes = 64 << 10;

void checkAborted(const ProgramRunner& runner, const ExecArgs& args) {
  if (runner.aborted()) {
    fail(ErrorCode::kAborted, "rank {}: {}: single copy: the communicator was aborted",
         runner.rank(), runner.what(args));
  }
}

[[noreturn]] void peerLeft(const ProgramRunner& runner, const ExecArgs& args, int q) {
  fail(ErrorCode::kRemoteError,
       "rank {}: {}: single copy: peer rank {} (a thread of this process) left the call before "
       "this rank was done with its buffers (did it fail or abort?)",
       runner.rank(), runner.what(args), q);
}

// The leases of the peers that are threads of this process, borrowed for one phase (so no such
// peer returns from the call while this rank touches its buffers: buffer_lease.h), given back
// at its end, also when it fails.
class Borrowed {
 public:
  Borrowed(const ProgramRunner& runner, const ExecArgs& args, int rank,
           const std::vector<PeerBuffers>& peers)
      : peers_(peers) {
    for (int q = 0; q < static_cast<int>(peers.size()); ++q) {
      if (q == rank || !peers[q].lease) continue;
      if (!peers[q].lease->borrow(peers[q].epoch)) peerLeft(runner, args, q);
      held_.push_back(q);
    }
  }
  ~Borrowed() {
    for (int q : held_) peers_[q].lease->giveBack();
  }
  Borrowed(const Borrowed&) = delete;
  Borrowed& operator=(const Borrowed&) = delete;

  /// Between blocks: aborted, or a lender is leaving the call.
  void check(const ProgramRunner& runner, const ExecArgs& args) const {
    checkAborted(runner, args);
    for (int q : held_) {
      if (peers_[q].lease->closing()) peerLeft(runner, args, q);
    }
  }

 private:
  const std::vector<PeerBuffers>& peers_;
  std::vector<int> held_;
};

// Reads `bytes` at `remote` of rank q into `local` (a plain copy for a rank of this process).
// A failure names the peer; a call aborted meanwhile is kAborted, whatever the read saw.
void readFrom(const ProgramRunner& runner, const ExecArgs& args, int q, const PeerBuffers& p,
              const char* what, const char* remote, char* local, size_t bytes) {
  if (runner.aborted()) {
    fail(ErrorCode::kAborted, "rank {}: {}: single copy: the communicator was aborted",
         runner.rank(), runner.what(args));
  }
  if (p.sameProcess) {
    std::memcpy(local, remote, bytes);
    return;
  }
  const int err = transport::readPeerMemory(p.pid, remote, local, bytes);
  if (err == 0) return;
  if (runner.aborted()) {
    fail(ErrorCode::kAborted, "rank {}: {}: single copy: the communicator was aborted",
         runner.rank(), runner.what(args));
  }
  // ESRCH: the process is gone; EFAULT: its buffer is (a peer that failed or aborted returned
  // from the call early). Either way that peer failed: its report follows on the endpoint.
  fail(err == ESRCH || err == EFAULT ? ErrorCode::kRemoteError : ErrorCode::kSystemError,
       "rank {}: {}: single copy: reading {} bytes of peer rank {}'s {} (pid {}) failed: {}{}",
       runner.rank(), runner.what(args), bytes, q, what, p.pid, std::strerror(err),
       err == ESRCH    ? " (its process is gone)"
       : err == EFAULT ? " (its buffer is gone: did it fail or abort?)"
                       : "");
}

// Copies `bytes` in blocks, looking between them whether the call was aborted or a lender left.
void copyBorrowed(const ProgramRunner& runner, const ExecArgs& args, const Borrowed& borrowed,
                  char* into, const char* from, size_t bytes) {
  constexpr size_t kCopyBlock = 1 << 20;
  for (size_t off = 0; off < bytes; off += kCopyBlock) {
    borrowed.check(runner, args);
    kernels::copy(into + off, from + off, std::min(kCopyBlock, bytes - off));
  }
}

}  // namespace

void SingleCopy::allGatherFrom(const ProgramRunner& runner, const ExecArgs& args, size_t count,
                               int rank, const std::vector<PeerBuffers>& peers) {
  const int n = static_cast<int>(peers.size());
  const size_t bytes = count * dataTypeSize(args.dtype);
  char* out = peers[rank].mappedOutput;
  const Borrowed borrowed(runner, args, rank, peers);
  for (int k = 0; k < n; ++k) {
    const int q = (rank + k) % n;  // ranks start at different sources
    char* into = out + size_t(q) * bytes;
    if (peers[q].mappedInput != into) {  // in place, this rank's block is its input
      copyBorrowed(runner, args, borrowed, into, peers[q].mappedInput, bytes);
    }
  }
}

void SingleCopy::reduceScatterFrom(const ProgramRunner& runner, const ExecArgs& args,
                                   size_t count, int rank, const std::vector<PeerBuffers>& peers) {
  const int n = static_cast<int>(peers.size());
  const size_t elem = dataTypeSize(args.dtype);
  const size_t unit = std::max<size_t>(1, kLine / elem);
  const size_t blockElems = std::max(unit, kMappedBlockBytes / elem / unit * unit);
  const RedOp op = args.op == RedOp::kAvg ? RedOp::kSum : args.op;
  const size_t base = size_t(rank) * count * elem;  // this rank's block of every input
  char* out = peers[rank].mappedOutput;
  std::vector<const void*> srcs(n);
  const Borrowed borrowed(runner, args, rank, peers);
  for (size_t b = 0; b < count; b += blockElems) {
    borrowed.check(runner, args);
    const size_t len = std::min(blockElems, count - b);
    const size_t off = b * elem;
    for (int q = 0; q < n; ++q) srcs[q] = peers[q].mappedInput + base + off;
    kernels::reduceMany(out + off, srcs.data(), n, len, args.dtype, op);
    if (args.op == RedOp::kAvg) kernels::divide(out + off, out + off, len, args.dtype, n);
  }
}

void SingleCopy::broadcastFrom(const ProgramRunner& runner, const ExecArgs& args, size_t count,
                               int root, int rank, const std::vector<PeerBuffers>& peers) {
  const size_t bytes = count * dataTypeSize(args.dtype);
  char* out = peers[rank].mappedOutput;
  const Borrowed borrowed(runner, args, rank, peers);
  if (peers[root].mappedInput != out) {
    copyBorrowed(runner, args, borrowed, out, peers[root].mappedInput, bytes);
  }
}

void SingleCopy::share(size_t count, size_t elemSize, int n, int r, size_t* lo, size_t* hi) {
  const size_t unit = std::max<size_t>(1, kLine / elemSize);
  const size_t units = (count + unit - 1) / unit;
  const size_t per = (units + n - 1) / n * unit;
  *lo = std::min(count, per * r);
  *hi = std::min(count, per * (r + 1));
}

bool SingleCopy::rankShare(size_t count, size_t elem, int n, int rank, size_t blockBytes,
                           size_t* lo, size_t* hi, size_t* blockElems) {
  share(count, elem, n, rank, lo, hi);
  const size_t unit = std::max<size_t>(1, kLine / elem);
  *blockElems = std::max(unit, blockBytes / elem / unit * unit);
  return *lo < *hi;
}

void SingleCopy::reduceShare(const ProgramRunner& runner, const ExecArgs& args, size_t count,
                             int rank, const std::vector<PeerBuffers>& peers) {
  const int n = static_cast<int>(peers.size());
  const size_t elem = dataTypeSize(args.dtype);
  size_t lo, hi, blockElems;
  if (!rankShare(count, elem, n, rank, kBlockBytes, &lo, &hi, &blockElems)) return;
  int remote = 0;
  for (int q = 0; q < n; ++q) remote += (q != rank && !peers[q].sameProcess);
  if (scratch_.size() < size_t(remote) * blockElems * elem) {
    scratch_.resize(size_t(remote) * blockElems * elem);
  }
  const RedOp op = args.op == RedOp::kAvg ? RedOp::kSum : args.op;
  char* out = reinterpret_cast<char*>(peers[rank].output);
  std::vector<const void*> srcs(n);
  const Borrowed borrowed(runner, args, rank, peers);
  for (size_t b = lo; b < hi; b += blockElems) {
    borrowed.check(runner, args);
    const size_t len = std::min(blockElems, hi - b);
    const size_t off = b * elem, bytes = len * elem;
    // Every rank's input block, in rank order (the same sum on every rank's share).
    int slot = 0;
    for (int q = 0; q < n; ++q) {
      const PeerBuffers& p = peers[q];
      const char* theirs = reinterpret_cast<const char*>(p.input) + off;
      if (q == rank || p.sameProcess) {
        srcs[q] = theirs;
        continue;
      }
      char* into = scratch_.data() + size_t(slot++) * blockElems * elem;
      readFrom(runner, args, q, p, "input", theirs, into, bytes);
      srcs[q] = into;
    }
    kernels::reduceMany(out + off, srcs.data(), n, len, args.dtype, op);
    if (args.op == RedOp::kAvg) kernels::divide(out + off, out + off, len, args.dtype, n);
  }
}

void SingleCopy::reduceToAll(const ProgramRunner& runner, const ExecArgs& args, size_t count,
                              int rank, const std::vector<PeerBuffers>& peers) {
  const int n = static_cast<int>(peers.size());
  const size_t elem = dataTypeSize(args.dtype);
  size_t lo, hi, blockElems;
  if (!rankShare(count, elem, n, rank, kMappedBlockBytes, &lo, &hi, &blockElems)) return;
  const RedOp op = args.op == RedOp::kAvg ? RedOp::kSum : args.op;
  char* mine = peers[rank].mappedOutput;
  std::vector<const void*> srcs(n);
  const Borrowed borrowed(runner, args, rank, peers);
  for (size_t b = lo; b < hi; b += blockElems) {
    borrowed.check(runner, args);
    const size_t len = std::min(blockElems, hi - b);
    const size_t off = b * elem, bytes = len * elem;
    if (n == 2 && args.op != RedOp::kAvg) {
      // One pass writes both outputs (the inputs in rank order, as reduceMany's).
      char* other = peers[1 - rank].mappedOutput;
      kernels::reduceCopy(mine + off, other + off, peers[0].mappedInput + off,
                          peers[1].mappedInput + off, len, args.dtype, op);
      continue;
    }
    for (int q = 0; q < n; ++q) srcs[q] = peers[q].mappedInput + off;
    kernels::reduceMany(mine + off, srcs.data(), n, len, args.dtype, op);
    if (args.op == RedOp::kAvg) kernels::divide(mine + off, mine + off, len, args.dtype, n);
    for (int k = 1; k < n; ++k) {
      const int q = (rank + k) % n;
      std::memcpy(peers[q].mappedOutput + off, mine + off, bytes);
    }
  }
}

void SingleCopy::gatherShares(const ProgramRunner& runner, const ExecArgs& args, size_t count,
                              int rank, const std::vector<PeerBuffers>& peers) {
  const int n = static_cast<int>(peers.size());
  const size_t elem = dataTypeSize(args.dtype);
  char* out = reinterpret_cast<char*>(peers[rank].output);
  const Borrowed borrowed(runner, args, rank, peers);
  for (int k = 1; k < n; ++k) {
    borrowed.check(runner, args);
    const int q = (rank + k) % n;  // ranks start at different owners
    size_t lo, hi;
    share(count, elem, n, q, &lo, &hi);
    if (lo >= hi) continue;
    readFrom(runner, args, q, peers[q], "output",
             reinterpret_cast<const char*>(peers[q].output) + lo * elem, out + lo * elem,
             (hi - lo) * elem);
  }
}

}  // namespace braid::comm
