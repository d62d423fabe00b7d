// braid's libnccl.so.2 on device buffers: 2 rank processes sharing GPU 0 (NCCL refuses that;
// braid allows it), an all-reduce and a send/recv pair stream-ordered on each rank's stream.
// Skips on a machine without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <vector>

#include "tests/cuda/device_case.h"
#include "tests/nccl/nccl_cases.h"
#include "tests/nccl/nccl_ranks.h"
#include "tests/support/skip.h"

namespace braid {
namespace {

using testing::ChildIo;

// CUDA must not be initialised in the parent before it forks the ranks: a child asks.
int deviceCount() {
  pid_t child = testing::forkChild([] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
  });
  const int code = testing::waitChild(child, Deadline::after(60));
  return code > 0 ? code : 0;
}

// Two rank processes on GPU 0, each running body(rank, io, its communicator); skips without a
// GPU.
// (A macro: the skip returns from the test.)
#define NCCL_ON_ONE_GPU(...)                                                   \
  do {                                                                         \
    if (deviceCount() == 0) {                                                  \
      BRAID_SKIP_NO_DEVICE("no CUDA device: device buffers cannot run here");  \
    }                                                                          \
    const std::string path = nccltest::idPath();                               \
    auto body = __VA_ARGS__;                                                   \
    nccltest::runRanks(2, [&](int rank, ChildIo& io) {                         \
      if (cudaSetDevice(0) != cudaSuccess) return testing::kChildUnexpected;   \
      return body(rank, io, nccltest::initRank(path, rank, 2));                \
    });                                                                        \
  } while (0)

TEST(NcclDevice, AllReduceAndSendRecvTwoRanksOnOneGpu) {
  NCCL_ON_ONE_GPU([](int rank, ChildIo& io, ncclComm_t comm) {
    const size_t n = 1 << 20;
    std::vector<float> host(n, float(rank + 1));
    void* mem = nullptr;
    cudaStream_t stream;
    if (cudaMalloc(&mem, n * sizeof(float)) != cudaSuccess || cudaStreamCreate(&stream) != cudaSuccess)
      return testing::kChildUnexpected;
    float* dev = static_cast<float*>(mem);
    cudaMemcpy(dev, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    NCCL_CHECK(ncclAllReduce(dev, dev, n, ncclFloat32, ncclSum, comm, stream));
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(dev, n / 2, ncclFloat32, 1 - rank, comm, stream));
    NCCL_CHECK(ncclRecv(dev + n / 2, n / 2, ncclFloat32, 1 - rank, comm, stream));
    NCCL_CHECK(ncclGroupEnd());
    if (cudaStreamSynchronize(stream) != cudaSuccess) return testing::kChildUnexpected;
    cudaMemcpy(host.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost);
    ncclResult_t async = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
    io.say("async", ncclGetErrorString(async));
    for (float v : host)
      if (v != 3.0f) return testing::kChildWrongData;
    NCCL_CHECK(ncclCommDestroy(comm));
    cudaFree(dev);
    return async == ncclSuccess ? testing::kChildOk : testing::kChildCheckFailed;
  });
}

// Every collective (all-to-all, gather and scatter too) on device buffers, stream-ordered: every
// type, the ops, counts 0, 1 and primes, in place and out of place, against the kit's reference.
TEST(NcclDevice, EveryCollectiveOnDeviceBuffersMatchesTheReference) {
  NCCL_ON_ONE_GPU([](int rank, ChildIo& io, ncclComm_t comm) {
    cudaStream_t stream;
    if (cudaStreamCreate(&stream) != cudaSuccess) return testing::kChildUnexpected;
    const std::vector<DataType> types(std::begin(testing::kAllTypes), std::end(testing::kAllTypes));
    const std::vector<RedOp> ops(std::begin(testing::kAllOps), std::end(testing::kAllOps));
    cudatest::DeviceScratch scratch(1031 * 2 * 8 + 64);
    for (const testing::CollectiveCase& c : nccltest::casesFor(2, types, ops)) {
      const std::string wrong = cudatest::runCaseOnDevice(
          rank, 2, c, scratch, stream, [&](const void* send, void* recv) {
            nccltest::check(nccltest::callNccl(comm, c, send, recv, stream), c.name().c_str());
          });
      if (!wrong.empty()) {
        io.say("wrong", wrong);
        return testing::kChildWrongData;
      }
    }
    NCCL_CHECK(ncclCommDestroy(comm));
    return testing::kChildOk;
  });
}

// PreMulSum on device buffers: rank r scales its input (all r+1) by a scalar held on the host
// (rank 0: 0.5) or in device memory (rank 1: 2, read by the kernel), then the sum; and
// ncclReduceScatter with the same op. Each element is 0.5*1 + 2*2 = 4.5.
TEST(NcclDevice, PreMulSumWithHostAndDeviceScalars) {
  NCCL_ON_ONE_GPU([](int rank, ChildIo& io, ncclComm_t comm) {
    const size_t n = 1001;
    std::vector<float> host(2 * n, float(rank + 1));
    void *mem = nullptr, *scalarMem = nullptr;
    cudaStream_t stream;
    if (cudaMalloc(&mem, 3 * n * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&scalarMem, sizeof(float)) != cudaSuccess ||
        cudaStreamCreate(&stream) != cudaSuccess)
      return testing::kChildUnexpected;
    float* dev = static_cast<float*>(mem);
    cudaMemcpy(dev, host.data(), 2 * n * sizeof(float), cudaMemcpyHostToDevice);
    float scalar = rank == 0 ? 0.5f : 2.0f;
    cudaMemcpy(scalarMem, &scalar, sizeof scalar, cudaMemcpyHostToDevice);
    ncclRedOp_t op;
    NCCL_CHECK(ncclRedOpCreatePreMulSum(&op, rank == 0 ? static_cast<void*>(&scalar) : scalarMem,
                                        ncclFloat32,
                                        rank == 0 ? ncclScalarHostImmediate : ncclScalarDevice,
                                        comm));
    NCCL_CHECK(ncclAllReduce(dev, dev + 2 * n, n, ncclFloat32, op, comm, stream));
    NCCL_CHECK(ncclReduceScatter(dev, dev, n, ncclFloat32, op, comm, stream));
    if (cudaStreamSynchronize(stream) != cudaSuccess) return testing::kChildUnexpected;
    std::vector<float> sum(n), scattered(n);
    cudaMemcpy(sum.data(), dev + 2 * n, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(scattered.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n; ++i) {
      if (sum[i] != 4.5f || scattered[i] != 4.5f) {
        io.say("wrong", std::to_string(i) + ": " + std::to_string(sum[i]) + ", " +
                            std::to_string(scattered[i]));
        return testing::kChildWrongData;
      }
    }
    NCCL_CHECK(ncclRedOpDestroy(op, comm));
    NCCL_CHECK(ncclCommDestroy(comm));
    cudaFree(dev);
    cudaFree(scalarMem);
    return testing::kChildOk;
  });
}

}  // namespace
}  // namespace braid
