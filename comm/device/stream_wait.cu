// The device side of completion.h and host_words.h: one thread polls a host-mapped word with a
// bounded spin (a stream waits for the progress thread), or writes one (the progress thread
// learns that a stream got there).
#include <cuda_runtime.h>

#include <cstdint>

#include "comm/device/completion.h"

namespace braid::comm::device {
namespace {

__device__ __forceinline__ uint64_t globalNanos() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void waitFlagKernel(uint32_t* flag, uint32_t target, uint64_t maxNanos) {
  const volatile uint32_t* word = flag;
  const uint64_t start = globalNanos();
  unsigned sleep = 32;
  while (static_cast<int32_t>(*word - target) < 0) {
    if (globalNanos() - start > maxNanos) {
      atomicExch_system(flag + 1, 1u);
      return;
    }
    __nanosleep(sleep);
    if (sleep < 2048) sleep *= 2;
  }
  // Order what the stream runs next after the flag was seen (acquire at system scope).
  __threadfence_system();
}

// Writes `value` to a host-mapped word once the stream's earlier work has finished (stream
// order); the fence makes that work's writes visible system-wide before the word is.
__global__ void signalKernel(uint32_t* word, uint32_t value) {
  __threadfence_system();
  atomicExch_system(word, value);
}

}  // namespace

int loadStreamKernels() {
  cudaFuncAttributes attr;
  cudaError_t err = cudaFuncGetAttributes(&attr, waitFlagKernel);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attr, signalKernel);
  return static_cast<int>(err);
}

int launchSignalKernel(void* stream, uint32_t* deviceWord, uint32_t value) {
  signalKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(deviceWord, value);
  return static_cast<int>(cudaGetLastError());
}

int launchWaitKernel(void* stream, const uint32_t* deviceFlag, uint32_t target, uint64_t maxNanos) {
  waitFlagKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(const_cast<uint32_t*>(deviceFlag),
                                                                 target, maxNanos);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace braid::comm::device
