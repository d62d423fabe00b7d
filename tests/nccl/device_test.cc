// braid's libnccl.so.2 on device buffers: 2 rank processes sharing GPU 0 (NCCL refuses that;
// braid allows it), an all-reduce and a send/recv pair stream-ordered on each rank's stream.
// Skips on a machine without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <vector>

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

TEST(NcclDevice, AllReduceAndSendRecvTwoRanksOnOneGpu) {
  if (deviceCount() == 0) BRAID_SKIP_NO_DEVICE("no CUDA device: device buffers cannot run here");
  const std::string path = nccltest::idPath();
  nccltest::runRanks(2, [&](int rank, ChildIo& io) {
    if (cudaSetDevice(0) != cudaSuccess) return testing::kChildUnexpected;
    ncclComm_t comm = nccltest::initRank(path, rank, 2);
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

}  // namespace
}  // namespace braid
