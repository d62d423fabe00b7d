#include "comm/device/device_executor.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "common/env.h"
#include "kernels/cuda/cuda_kernels.h"

namespace braid::comm::device {
namespace {

namespace kc = braid::kernels::cuda;

constexpr int kSpinRounds = 64;
const Clock::duration kActiveWait = std::chrono::microseconds(envInt("BRAID_SPIN_US", 2000));
constexpr auto kSleepSlice = std::chrono::milliseconds(20);
constexpr auto kPeerCheckEvery = std::chrono::milliseconds(50);

cudaStream_t asStream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

DeviceExecutor::DeviceExecutor(transport::Endpoint& endpoint, const std::atomic<bool>& aborted,
                               void* stream)
    : ep_(endpoint),
      aborted_(aborted),
      stream_(stream),
      rank_(endpoint.rank()),
      size_(endpoint.size()) {
  cudaEvent_t ev;
  cudaError_t err = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (err != cudaSuccess) {
    fail(ErrorCode::kCudaError, "rank {}: device executor: cudaEventCreate failed: {}", rank_,
         cudaGetErrorString(err));
  }
  event_ = ev;
  gatherSrcs_.resize(size_);
}

DeviceExecutor::~DeviceExecutor() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

char* DeviceExecutor::address(Buf buf, size_t elemOffset, const ExecArgs& args) const {
  char* base = buf == Buf::kInput ? const_cast<char*>(static_cast<const char*>(args.input))
                                  : static_cast<char*>(args.output);
  return base + elemOffset * elemSize_;
}

std::string DeviceExecutor::what(const ExecArgs& args) const {
  OpHeader called = args.header;
  called.coll = args.called;
  return fmt::format("{} of {} bytes on the device", describeHeader(called),
                     args.header.count * dataTypeSize(args.dtype));
}

void DeviceExecutor::checkHeader(const transport::MessageMeta& meta, size_t bytes,
                                 size_t expectBytes, int peer, const ExecArgs& args) {
  if (std::memcmp(meta.words, expectedMeta_.words, sizeof meta.words) != 0) {
    OpHeader got = decodeHeader(meta);
    fail(ErrorCode::kMismatch,
         "rank {}: {}: collective mismatch with peer rank {}: this rank called {}, peer rank {} "
         "called {}",
         rank_, what(args), peer, describeHeader(args.header), peer, describeHeader(got));
  }
  if (bytes != expectBytes) {
    fail(ErrorCode::kMismatch,
         "rank {}: {}: message of {} bytes from peer rank {} where {} bytes were expected", rank_,
         what(args), bytes, peer, expectBytes);
  }
}

void DeviceExecutor::launched(int err, const char* kernel, const ExecArgs& args) {
  if (err != 0) {
    fail(ErrorCode::kCudaError, "rank {}: {}: launching {} failed: {} ({})", rank_, what(args),
         kernel, kc::errorString(err), err);
  }
}

bool DeviceExecutor::tryLaunch(Cursor& c, const ExecArgs& args) {
  const Step& s = c.lane->steps[c.step];
  if (s.count == 0) {
    c.step++;
    return true;
  }
  const size_t per = args.elemsPerPiece;
  const size_t begin = c.piece * per;
  const size_t len = std::min(per, s.count - begin);
  const size_t bytes = len * elemSize_;

  const void* slot = nullptr;
  transport::RecvChannel* in = nullptr;
  if (s.prim == Prim::kGatherReduce) {
    BRAID_ENFORCE(size_ <= kc::kMaxSources, ErrorCode::kInvalidUsage,
                  "rank {}: {}: the one-shot device reduce takes at most {} ranks", rank_,
                  what(args), kc::kMaxSources);
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      size_t got = 0;
      transport::MessageMeta meta;
      const void* p = ep_.recv(q, s.channel).tryPeek(&got, &meta);
      if (p == nullptr) return false;
      checkHeader(meta, got, bytes, q, args);
      gatherSrcs_[q] = p;
    }
  } else if (primReceives(s.prim)) {
    in = &ep_.recv(s.recvPeer, s.channel);
    size_t got = 0;
    transport::MessageMeta meta;
    slot = in->tryPeek(&got, &meta);
    if (slot == nullptr) return false;
    checkHeader(meta, got, bytes, s.recvPeer, args);
  }
  transport::SendChannel* outCh = nullptr;
  void* out = nullptr;
  if (primSends(s.prim)) {
    outCh = &ep_.send(s.sendPeer, s.channel);
    out = outCh->tryAcquire();
    if (out == nullptr) return false;
  }

  const uint64_t divisor = (s.finalize && args.op == RedOp::kAvg && size_ > 1) ? size_ : 1;
  char* src = primReads(s.prim) ? address(s.src.buf, s.src.offset + begin, args) : nullptr;
  char* dst = primWrites(s.prim) ? address(s.dst.buf, s.dst.offset + begin, args) : nullptr;
  void* st = stream_;
  // Operand order as the host executor (slot first), so results are bit-identical.
  switch (s.prim) {
    case Prim::kSend:
      launched(kc::copyAsync(out, nullptr, src, bytes, st), "copy", args);
      break;
    case Prim::kRecv:
      launched(kc::copyAsync(dst, nullptr, slot, bytes, st), "copy", args);
      break;
    case Prim::kRecvReduce:
      launched(kc::reduceCopyAsync(dst, nullptr, slot, src, len, args.dtype, args.op, divisor, st),
               "reduce", args);
      break;
    case Prim::kRecvReduceSend:
      launched(kc::reduceCopyAsync(out, nullptr, slot, src, len, args.dtype, args.op, 1, st),
               "reduce", args);
      break;
    case Prim::kRecvReduceCopySend:
      launched(kc::reduceCopyAsync(dst, out, slot, src, len, args.dtype, args.op, divisor, st),
               "reduce-copy", args);
      break;
    case Prim::kRecvCopySend:
      launched(kc::copyAsync(dst, out, slot, bytes, st), "copy", args);
      break;
    case Prim::kCopy:
      if (divisor > 1) {
        launched(kc::divideAsync(dst, src, len, args.dtype, divisor, st), "divide", args);
      } else if (dst != src) {
        launched(kc::copyAsync(dst, nullptr, src, bytes, st), "copy", args);
      }
      break;
    case Prim::kGatherReduce:
      gatherSrcs_[rank_] = src;
      launched(kc::reduceManyAsync(dst, gatherSrcs_.data(), size_, len, args.dtype, args.op,
                                   divisor, st),
               "reduce-many", args);
      break;
  }
  pending_.push_back(Pending{&c, in, s.prim == Prim::kGatherReduce, outCh, bytes});
  return true;
}

void DeviceExecutor::waitStream(const ExecArgs& args, const std::vector<Cursor>& cursors) {
  auto ev = static_cast<cudaEvent_t>(event_);
  cudaError_t err = cudaEventRecord(ev, asStream(stream_));
  if (err != cudaSuccess) {
    fail(ErrorCode::kCudaError, "rank {}: {}: cudaEventRecord failed: {}", rank_, what(args),
         cudaGetErrorString(err));
  }
  // The kernels are bounded (no device-side waits), so this ends unless the GPU is lost; still
  // bounded by the timeout, and abort() is noticed.
  const Deadline deadline = Deadline::after(args.timeoutSeconds);
  for (int round = 0;; ++round) {
    err = cudaEventQuery(ev);
    if (err == cudaSuccess) return;
    if (err != cudaErrorNotReady) {
      fail(ErrorCode::kCudaError, "rank {}: {}: a kernel failed: {} ({})", rank_, what(args),
           cudaGetErrorString(err), int(err));
    }
    if (round < kSpinRounds) continue;
    if (aborted_.load(std::memory_order_relaxed)) {
      failWaiting(ErrorCode::kAborted, cursors, args, "communicator aborted by this process");
    }
    if (deadline.expired()) {
      failWaiting(
          ErrorCode::kTimeout, cursors, args,
          fmt::format("kernels did not finish in {} s (BRAID_TIMEOUT)", args.timeoutSeconds));
    }
    if (round < 4 * kSpinRounds) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

void DeviceExecutor::finishPending(const ExecArgs& args, const std::vector<Cursor>& cursors) {
  if (pending_.empty()) return;
  waitStream(args, cursors);
  for (Pending& p : pending_) {
    const Step& s = p.cursor->lane->steps[p.cursor->step];
    if (p.gather) {
      for (int q = 0; q < size_; ++q)
        if (q != rank_) ep_.recv(q, s.channel).release();
    } else if (p.in != nullptr) {
      p.in->release();
    }
    if (p.out != nullptr) p.out->post(p.bytes, expectedMeta_);
    if (++p.cursor->piece == pieceCount(s.count, args.elemsPerPiece)) {
      p.cursor->piece = 0;
      p.cursor->step++;
    }
  }
  pending_.clear();
}

void DeviceExecutor::failWaiting(ErrorCode code, const std::vector<Cursor>& cursors,
                                 const ExecArgs& args, const std::string& why) {
  std::string waiting;
  for (const Cursor& c : cursors) {
    if (c.step >= c.lane->steps.size()) continue;
    const Step& s = c.lane->steps[c.step];
    if (s.prim == Prim::kGatherReduce) {
      waiting += fmt::format("; waiting to receive from all peers on channel {}", s.channel);
    } else {
      if (primReceives(s.prim))
        waiting += fmt::format("; waiting to receive from peer rank {} on channel {}", s.recvPeer,
                               s.channel);
      if (primSends(s.prim))
        waiting +=
            fmt::format("; waiting to send to peer rank {} on channel {}", s.sendPeer, s.channel);
    }
  }
  // Kernels may still be queued on the stream; let them finish before buffers are given back.
  cudaStreamSynchronize(asStream(stream_));
  pending_.clear();
  fail(code, "rank {}: {}: {}{}", rank_, what(args), why, waiting);
}

void DeviceExecutor::slowPathChecks(const std::vector<Cursor>& cursors, const ExecArgs& args,
                                    bool checkPeers) {
  if (aborted_.load(std::memory_order_relaxed)) {
    failWaiting(ErrorCode::kAborted, cursors, args, "communicator aborted by this process");
  }
  if (auto remote = ep_.peerAbort()) {
    std::string reason;
    const ErrorCode code = decodeAbortReason(remote->second, &reason);
    failWaiting(code, cursors, args,
                fmt::format("peer rank {} failed and reported: {}", remote->first, reason));
  }
  if (!checkPeers) return;
  for (const Cursor& c : cursors) {
    if (c.step >= c.lane->steps.size()) continue;
    const Step& s = c.lane->steps[c.step];
    auto check = [&](int peer) {
      if (peer >= 0 && peer != rank_ && !ep_.peerAlive(peer)) {
        failWaiting(
            ErrorCode::kRemoteError, cursors, args,
            fmt::format("peer rank {} is gone (its process exited or it closed the communicator)",
                        peer));
      }
    };
    if (s.prim == Prim::kGatherReduce) {
      for (int q = 0; q < size_; ++q) check(q);
    } else {
      if (primReceives(s.prim)) check(s.recvPeer);
      if (primSends(s.prim)) check(s.sendPeer);
    }
  }
}

void DeviceExecutor::run(const RankProgram& program, const ExecArgs& args) {
  elemSize_ = dataTypeSize(args.dtype);
  expectedMeta_ = encodeHeader(args.header);
  cursors_.clear();
  pending_.clear();
  for (const Lane& lane : program.lanes) {
    if (!lane.steps.empty()) cursors_.push_back(Cursor{&lane, 0, 0});
  }
  auto unfinished = [&] {
    size_t n = 0;
    for (const Cursor& c : cursors_) n += c.step < c.lane->steps.size();
    return n;
  };
  const auto timeout = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(args.timeoutSeconds));
  int idle = 0;
  Clock::time_point lastProgress{}, lastPeerCheck{};
  // One sweep: at most one piece per lane launched, then one wait for all of them.
  auto sweep = [&] {
    bool progressed = false;
    for (Cursor& c : cursors_) {
      // Zero-count steps advance without a launch; a launched piece waits for finishPending.
      while (c.step < c.lane->steps.size()) {
        const size_t before = pending_.size();
        if (!tryLaunch(c, args)) break;
        progressed = true;
        if (pending_.size() != before) break;
      }
    }
    finishPending(args, cursors_);
    return progressed;
  };
  while (unfinished() > 0) {
    if (sweep()) {
      idle = 0;
      continue;
    }
    if (++idle < kSpinRounds) continue;
    const auto now = Clock::now();
    if (idle == kSpinRounds) {
      lastProgress = now;
      lastPeerCheck = now;
    }
    if (now - lastProgress < kActiveWait) {
      if (aborted_.load(std::memory_order_relaxed)) slowPathChecks(cursors_, args, false);
      sched_yield();
      continue;
    }
    const bool checkPeers = now - lastPeerCheck >= kPeerCheckEvery;
    if (checkPeers) lastPeerCheck = now;
    slowPathChecks(cursors_, args, checkPeers);
    if (now - lastProgress >= timeout) {
      failWaiting(ErrorCode::kTimeout, cursors_, args,
                  fmt::format("no progress for {} s (BRAID_TIMEOUT)", args.timeoutSeconds));
    }
    uint32_t ticket = ep_.prepareSleep();
    const bool moved = sweep();
    const auto until = moved ? now : std::min(now + kSleepSlice, lastProgress + timeout);
    ep_.sleep(ticket, until);
    if (moved) idle = 0;
  }
}

}  // namespace braid::comm::device
