// Where a buffer lives, as far as nccl/ needs to know: CUDA device memory (the device path) or
// anything else (braid's host path). Defined by cuda_memory.cc where the build has CUDA, by
// host_memory.cc where it has not.
#pragma once

#include <cstddef>

#include "braid/types.hpp"

namespace braid::nccl {

/// True for CUDA device or managed memory; false for host memory, null, or without CUDA.
bool isDeviceMemory(const void* ptr);
/// The calling thread's current CUDA device; -1 when there is no usable one.
int currentDevice();
/// ncclMemAlloc's memory: device memory on the current device (host memory without CUDA);
/// throws kCudaError naming the size when it cannot.
void* allocateBuffer(size_t bytes);
void freeBuffer(void* ptr);
/// `count` elements of `src` (device memory) times `scalar`, or times the one element at
/// `scalarAt` (device memory, read when the stream gets there) when it is not null, into device
/// memory allocated on `stream` (a cudaStream_t), which the caller gives back with freeOnStream
/// once it enqueued what reads it. Throws kCudaError naming the size. Without CUDA: unreachable
/// (no buffer is device memory), throws kInvalidUsage.
void* scaledOnStream(const void* src, size_t count, DataType type, double scalar,
                     const void* scalarAt, void* stream);
void freeOnStream(void* ptr, void* stream);
/// Copies `bytes` from src to dst ordered on `stream` (a cudaStream_t; device or host memory);
/// throws kCudaError. Without CUDA: a plain copy.
void copyOnStream(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace braid::nccl
