// The executor kernel (executor.h: the protocol and why it is sound).
#include <cuda_runtime.h>

#include "kernels/cuda/element_loops.cuh"
#include "kernels/cuda/executor.h"

namespace braid::kernels::cuda {
namespace detail {
namespace {

constexpr unsigned long long kNoChunk = ~0ull;
constexpr int kCountBits = 24;  // claim word: command number << 24 | chunks claimed
constexpr unsigned long long kCountMask = (1ull << kCountBits) - 1;

__device__ __forceinline__ uint64_t nanosNow() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint64_t loadAcquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint32_t loadAcquire32(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void storeRelease(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void storeRelease32(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/// The sources of a kReduceMany command, copied into shared memory.
struct SharedSources {
  const void* const* p;
  __device__ __forceinline__ const void* operator[](int k) const { return p[k]; }
};

// One chunk of a command, by the whole block. The kernel is instantiated per element type and
// op (every command of an op has the op's), so only the kind is chosen here.
template <typename T, typename Op>
__device__ __forceinline__ void runChunk(const ExecCommand& c, const void* const* srcs,
                                         uint64_t chunk) {
  using S = typename Traits<T>::S;
  const uint64_t begin = chunk * c.chunkElems;
  if (begin >= c.count) return;  // the one chunk of an empty command
  const uint64_t n = c.count - begin < c.chunkElems ? c.count - begin : c.chunkElems;
  const size_t tid = threadIdx.x, stride = blockDim.x;
  const auto at = [begin](const void* p, auto* typed) {
    using P = decltype(typed);
    return p == nullptr ? nullptr : static_cast<P>(const_cast<void*>(p)) + begin;
  };
  switch (ExecKind(c.kind)) {
    case ExecKind::kCopy: {
      const bool vec = aligned16(c.dst0) && aligned16(c.dst1) && aligned16(c.a);
      copyLoop<CoherentLoads>(at(c.dst0, (char*)nullptr), at(c.dst1, (char*)nullptr),
                              at(c.a, (char*)nullptr), n, vec, tid, stride);
      break;
    }
    case ExecKind::kReduceCopy: {
      const bool vec = aligned16(c.dst0) && aligned16(c.dst1) && aligned16(c.a) && aligned16(c.b);
      reduceCopyLoop<T, Op, CoherentLoads>(at(c.dst0, (S*)nullptr), at(c.dst1, (S*)nullptr),
                                           at(c.a, (S*)nullptr), at(c.b, (S*)nullptr), n, c.divisor,
                                           vec, tid, stride);
      break;
    }
    case ExecKind::kDivide:
      divideLoop<T, CoherentLoads>(at(c.dst0, (S*)nullptr), at(c.a, (S*)nullptr), n, c.divisor, tid,
                                   stride);
      break;
    case ExecKind::kReduceMany: {
      bool vec = aligned16(c.dst0);
      for (int k = 0; k < c.nsrc; ++k) vec = vec && aligned16(srcs[k]);
      reduceManyLoop<T, Op, CoherentLoads>(at(c.dst0, (S*)nullptr), SharedSources{srcs}, c.nsrc,
                                           begin, n, c.divisor, vec, tid, stride);
      break;
    }
  }
}

/// A command of another type or op than the instance's: bytes, with the command's op (the host
/// lets nothing else through: ExecRing::runs). Only the one-byte exchanges that end some ops come
/// here, so a plain loop with the op chosen per element (instantiating the vector loops for every
/// byte op inside every instance made the file take minutes to compile).
__device__ __forceinline__ void runByteChunk(const ExecCommand& c, const void* const* srcs,
                                             uint64_t chunk) {
  const uint64_t begin = chunk * c.chunkElems;
  if (begin >= c.count) return;
  const uint64_t n = c.count - begin < c.chunkElems ? c.count - begin : c.chunkElems;
  const auto in = [begin](const void* p, uint64_t i) {
    return CoherentLoads::elem(static_cast<const uint8_t*>(p) + begin + i);
  };
  uint8_t* dst0 = static_cast<uint8_t*>(c.dst0) + begin;
  uint8_t* dst1 = c.dst1 == nullptr ? nullptr : static_cast<uint8_t*>(c.dst1) + begin;
  for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) {
    uint8_t r;
    if (ExecKind(c.kind) == ExecKind::kReduceMany) {
      r = in(srcs[0], i);
      for (int k = 1; k < c.nsrc; ++k) r = applyOp(RedOp(c.op), r, in(srcs[k], i));
    } else if (ExecKind(c.kind) == ExecKind::kReduceCopy) {
      r = applyOp(RedOp(c.op), in(c.a, i), in(c.b, i));
    } else {  // kDivide
      r = in(c.a, i);
    }
    if (c.divisor > 1) r = divideElem<uint8_t>(r, c.divisor);
    dst0[i] = r;
    if (dst1 != nullptr) dst1[i] = r;
  }
}

/// Claims the next chunk of command `seq` (chunks in all), or kNoChunk when none is left or the
/// slot's word already belongs to a later command.
__device__ unsigned long long claim(unsigned long long* word, uint64_t seq, uint64_t chunks) {
  unsigned long long w = *reinterpret_cast<volatile unsigned long long*>(word);
  for (;;) {
    const uint64_t wseq = w >> kCountBits;
    unsigned long long next;
    if (wseq == seq) {
      if ((w & kCountMask) >= chunks) return kNoChunk;
      next = w + 1;
    } else if (wseq < seq) {
      next = (static_cast<unsigned long long>(seq) << kCountBits) | 1;  // the first claim
    } else {
      return kNoChunk;
    }
    const unsigned long long seen = atomicCAS(word, w, next);
    if (seen == w) return (next & kCountMask) - 1;
    w = seen;
  }
}

enum Action : int { kRun = 1, kExit = 0 };

/// Thread 0: waits until command `*seq` (or a later one, for a block that lags) of this op is
/// posted and copies it into `c`/`srcs`, or until the op ended (kExit). Gives up after
/// maxIdleNanos without either (flag word 1, then kExit).
__device__ int nextCommand(const ExecParams& p, uint64_t* seq, ExecCommand* c, const void** srcs) {
  const ExecChannel* ch = p.channel;
  const uint32_t t32 = static_cast<uint32_t>(p.ticket);
  uint64_t idleSince = nanosNow();
  unsigned sleep = 0;
  for (;;) {
    if (static_cast<int32_t>(loadAcquire32(p.flag) - t32) >= 0) return kExit;  // the op ended
    if (loadAcquire(&ch->posted) > *seq) {
      const ExecCommand* slot = &ch->cmd[*seq % kExecRing];
      const volatile uint64_t* words = reinterpret_cast<const volatile uint64_t*>(slot);
      const uint64_t sealBefore = loadAcquire(&slot->seal);
      uint64_t* out = reinterpret_cast<uint64_t*>(c);
      for (size_t i = 0; i < sizeof(ExecCommand) / 8; ++i) out[i] = words[i];
      if (ExecKind(c->kind) == ExecKind::kReduceMany) {
        const volatile uint64_t* s =
            reinterpret_cast<const volatile uint64_t*>(ch->srcs[*seq % kExecRing]);
        for (int k = 0; k < c->nsrc && k < kMaxSources; ++k) {
          srcs[k] = reinterpret_cast<const void*>(s[k]);
        }
      }
      __threadfence_system();
      const uint64_t sealAfter = loadAcquire(&slot->seal);
      // Whole (the seal was the same, and this command's, before and after the copy), this op's,
      // and not older than the one wanted (a lagging block takes whatever the slot holds now).
      if (sealBefore == sealAfter && sealAfter == c->seq + 1 && c->ticket == p.ticket &&
          c->seq >= *seq) {
        *seq = c->seq;
        return kRun;
      }
      // Torn (being rewritten) or not this op's: read again.
    }
    const uint64_t now = nanosNow();
    if (now - idleSince > p.maxIdleNanos) {
      atomicExch_system(p.flag + 1, 1u);
      return kExit;
    }
    if (sleep > 0) __nanosleep(sleep);
    sleep = sleep == 0 ? 32 : (sleep < 1024 ? sleep * 2 : sleep);
  }
}

template <typename T, typename Op>
__global__ void __launch_bounds__(kExecThreads) executorKernel(ExecParams p) {
  __shared__ ExecCommand c;
  __shared__ const void* srcs[kMaxSources];
  __shared__ int action;
  __shared__ unsigned long long chunk;
  if (threadIdx.x == 0) {
    // Any block may be the first the GPU schedules; each says "started" (the last one out says
    // "exited", after every block said "started").
    __threadfence_system();  // the stream's earlier work, before "started"
    storeRelease32(p.ready, kExecStarted);
  }
  uint64_t seq = 0;
  if (threadIdx.x == 0) {
    // The host names this op the owner (with its first command's number) once it saw "started".
    const uint32_t t32 = static_cast<uint32_t>(p.ticket);
    const uint64_t idleSince = nanosNow();
    action = kRun;
    for (unsigned sleep = 32;; sleep = sleep < 1024 ? sleep * 2 : sleep) {
      if (loadAcquire(&p.channel->owner) == p.ticket) {
        seq = loadAcquire(&p.channel->firstSeq);
        break;
      }
      if (static_cast<int32_t>(loadAcquire32(p.flag) - t32) >= 0) {
        action = kExit;
        break;
      }
      if (nanosNow() - idleSince > p.maxIdleNanos) {
        atomicExch_system(p.flag + 1, 1u);
        action = kExit;
        break;
      }
      __nanosleep(sleep);
    }
  }
  __syncthreads();
  while (action == kRun) {
    __syncthreads();  // everyone saw `action` before thread 0 rewrites it
    if (threadIdx.x == 0) action = nextCommand(p, &seq, &c, srcs);
    __syncthreads();
    if (action != kRun) break;
    const uint64_t chunks = execChunks(c);
    const unsigned slot = c.seq % kExecRing;
    for (;;) {
      if (threadIdx.x == 0) chunk = claim(&p.slots->claim[slot], c.seq, chunks);
      __syncthreads();
      const unsigned long long mine = chunk;
      if (mine == kNoChunk) break;
      const uint8_t cop = c.op == uint8_t(RedOp::kAvg) ? uint8_t(RedOp::kSum) : c.op;
      if (ExecKind(c.kind) == ExecKind::kCopy || (c.dtype == p.dtype && cop == p.op)) {
        runChunk<T, Op>(c, srcs, mine);
      } else {
        runByteChunk(c, srcs, mine);
      }
      __syncthreads();  // the chunk is written (and everyone read `chunk`)
      if (threadIdx.x == 0) {
        __threadfence();
        const unsigned long long before = atomicAdd(&p.slots->completed[slot], 1ull);
        if (before + 1 == chunks) {
          // The last chunk: reset the count for the slot's next command, then report.
          p.slots->completed[slot] = 0;
          __threadfence_system();
          storeRelease(&p.channel->done[slot], c.seq + 1);
        }
      }
    }
    ++seq;
  }
  // The last block out resets the exit count and frees the ready word.
  if (threadIdx.x == 0) {
    __threadfence_system();  // this block's "started" before its count
    if (atomicAdd(p.exited, 1u) + 1 == gridDim.x) {
      *p.exited = 0;
      __threadfence_system();
      storeRelease32(p.ready, kExecExited);
    }
  }
}

struct LaunchExecutor {
  template <typename T, typename Op>
  static int run(const ExecParams* params, unsigned blocks, cudaStream_t stream) {
    executorKernel<T, Op><<<blocks, kExecThreads, 0, stream>>>(*params);
    return static_cast<int>(cudaGetLastError());
  }
};

// The registers of one instance (negative: the cudaError_t of the query), which loads it.
struct ExecutorRegisters {
  template <typename T, typename Op>
  static int run() {
    cudaFuncAttributes attr;
    const cudaError_t err = cudaFuncGetAttributes(&attr, executorKernel<T, Op>);
    return err == cudaSuccess ? attr.numRegs : -static_cast<int>(err);
  }
};

/// Over every instance: the most registers, or the first error as a negative cudaError_t.
int maxExecutorRegisters() {
  int most = 0;
  for (int t = 0; t < kNumDataTypes; ++t) {
    for (int o = 0; o < kNumRedOps; ++o) {
      const int r = dispatch<ExecutorRegisters>("loadExecutor", DataType(t), RedOp(o));
      if (r < 0) return r;
      if (r > most) most = r;
    }
  }
  return most;
}

}  // namespace
}  // namespace detail

int launchExecutor(const ExecParams& params, unsigned blocks, DataType type, RedOp op,
                   void* stream) {
  return detail::dispatch<detail::LaunchExecutor>("launchExecutor", type, op, &params, blocks,
                                                  static_cast<cudaStream_t>(stream));
}

int loadExecutor() {
  const int r = detail::maxExecutorRegisters();
  return r < 0 ? -r : 0;
}

int executorRegisters() {
  const int r = detail::maxExecutorRegisters();
  if (r < 0) cudaGetLastError();
  return r < 0 ? -1 : r;
}

}  // namespace braid::kernels::cuda
