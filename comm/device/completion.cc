#include "comm/device/completion.h"

#include <cuda.h>  // types only: the driver is reached through cudaGetDriverEntryPoint
#include <cuda_runtime_api.h>

#include <atomic>
#include <string>

#include "common/env.h"
#include "common/error.h"
#include "common/log.h"

namespace braid::comm::device {
namespace {

using WaitValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

void check(cudaError_t err, int rank, const char* call) {
  if (err != cudaSuccess) {
    fail(ErrorCode::kCudaError, "rank {}: device completion flag: {} failed: {} ({})", rank, call,
         cudaGetErrorString(err), int(err));
  }
}

}  // namespace

CompletionFlag::CompletionFlag(int rank) : rank_(rank), words_(rank, 2, "the completion flag") {
  // Loaded now, not at their first launch (the wait kernel may be the driver wait's fallback).
  check(static_cast<cudaError_t>(loadStreamKernels()), rank, "loading the stream kernels");
  const std::string mode = envString("BRAID_CUDA_WAIT").value_or("auto");
  BRAID_ENFORCE(mode == "auto" || mode == "kernel" || mode == "driver", ErrorCode::kInvalidUsage,
                "BRAID_CUDA_WAIT='{}': expected auto, kernel or driver", mode);
  if (mode != "kernel") {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    cudaError_t err = cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000,
                                                       cudaEnableDefault, &found);
    if (err == cudaSuccess && found == cudaDriverEntryPointSuccess && fn != nullptr) {
      waitValue_ = fn;
      useDriver_ = true;
    } else {
      cudaGetLastError();
      BRAID_ENFORCE(mode != "driver", ErrorCode::kCudaError,
                    "rank {}: BRAID_CUDA_WAIT=driver but the driver has no cuStreamWaitValue32",
                    rank);
    }
  }
  BRAID_INFO("rank {}: device streams wait for collectives with {}", rank, this->mode());
}

CompletionFlag::~CompletionFlag() = default;

void CompletionFlag::enqueueWait(void* stream, uint32_t target, double maxSeconds) {
  if (useDriver_) {
    auto fn = reinterpret_cast<WaitValueFn>(waitValue_);
    CUresult r = fn(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(words_.device(0)), target,
                    CU_STREAM_WAIT_VALUE_GEQ);
    if (r == CUDA_SUCCESS) return;
    // Not supported here after all: fall back to the kernel for good.
    BRAID_WARN("rank {}: cuStreamWaitValue32 failed ({}); using the wait kernel", rank_, int(r));
    useDriver_ = false;
  }
  const double nanos = maxSeconds * 1e9;
  const uint64_t maxNanos = nanos > 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(nanos);
  check(static_cast<cudaError_t>(launchWaitKernel(stream, words_.device(0), target, maxNanos)), rank_,
        "launching the stream wait kernel");
}

void CompletionFlag::publish(uint32_t value) { words_.store(0, value); }

uint32_t CompletionFlag::value() const { return words_.load(0); }

bool CompletionFlag::waitGaveUp() const { return words_.load(1) != 0; }

}  // namespace braid::comm::device
