// Device collectives with ranks as threads of this process on one GPU (raw pointers between
// ranks, no IPC handles): every algorithm x rank count, plus errors and stream ordering.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "tests/cuda/collective_check.h"
#include "tests/cuda/device_case.h"
#include "tests/cuda/gpu_util.h"
#include "tests/kit/communicators.h"

namespace braid {
namespace {

// Up to 8 rank threads with two streams each: more than the default 8 hardware queues, so streams
// would share them and a rank's stream wait could hold a peer's collective queued behind it (the
// likeliest cause of the hangs on an H100, comm/device/README.md). Set before CUDA starts.
const int kMoreQueues = setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);

void runDeviceRanks(int n, Algorithm algo, const std::function<void(DeviceCommunicator&)>& fn) {
  Options options;
  options.timeoutSeconds = 30;
  cudatest::DeferFrees deferFrees;  // freed after every rank thread has joined
  auto errors = testing::runRanks(n, options, [&](Communicator& host) {
    cudaSetDevice(0);
    Options dopt = options;
    dopt.algorithm = algo;
    DeviceCommunicator dc = DeviceCommunicator::create(host, 0, dopt);
    fn(dc);
    dc.synchronize();
  });
  for (int r = 0; r < n; ++r) {
    if (errors[r]) {
      try {
        std::rethrow_exception(errors[r]);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    }
  }
}

struct Case {
  int ranks;
  Algorithm algo;
};

class DeviceThreads : public ::testing::TestWithParam<Case> {};

TEST_P(DeviceThreads, EveryCollectiveTypeAndOpMatchesTheReference) {
  BRAID_REQUIRE_GPU();
  const Case c = GetParam();
  runDeviceRanks(c.ranks, c.algo, [&](DeviceCommunicator& dc) {
    // Small and odd counts for every type; a multi-slot count for a few.
    std::string err = cudatest::checkDeviceCollectives(dc, {1, 1001}, true, c.algo);
    err += cudatest::checkDeviceCollectives(dc, {300007}, false, c.algo);
    EXPECT_EQ(err, "");
  });
}

INSTANTIATE_TEST_SUITE_P(RanksAndAlgorithms, DeviceThreads,
                         ::testing::Values(Case{1, Algorithm::kAuto}, Case{2, Algorithm::kRing},
                                           Case{2, Algorithm::kOneShot}, Case{3, Algorithm::kRing},
                                           Case{3, Algorithm::kOneShot}, Case{4, Algorithm::kAuto},
                                           Case{5, Algorithm::kRing}, Case{8, Algorithm::kAuto}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::to_string(info.param.ranks) + "ranks_" +
                                  algorithmName(info.param.algo);
                         });

// The same through the executor kernel (BRAID_CUDA_ENGINE=executor, comm/device/README.md): every
// collective, type and op, broadcast and reduce with their one-byte completion exchange too.
class DeviceThreadsExecutor : public ::testing::TestWithParam<Case> {};

TEST_P(DeviceThreadsExecutor, EveryCollectiveTypeAndOpMatchesTheReference) {
  BRAID_REQUIRE_GPU();
  const Case c = GetParam();
  ASSERT_EQ(setenv("BRAID_CUDA_ENGINE", "executor", 1), 0);
  runDeviceRanks(c.ranks, c.algo, [&](DeviceCommunicator& dc) {
    std::string err = cudatest::checkDeviceCollectives(dc, {1, 1001}, true, c.algo);
    err += cudatest::checkDeviceCollectives(dc, {300007}, false, c.algo);
    err += cudatest::checkDeviceExchanges(dc, Algorithm::kAuto);
    EXPECT_EQ(err, "");
  });
  unsetenv("BRAID_CUDA_ENGINE");
}

INSTANTIATE_TEST_SUITE_P(RanksAndAlgorithms, DeviceThreadsExecutor,
                         ::testing::Values(Case{1, Algorithm::kAuto}, Case{2, Algorithm::kRing},
                                           Case{3, Algorithm::kOneShot},
                                           Case{4, Algorithm::kAuto}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::to_string(info.param.ranks) + "ranks_" +
                                  algorithmName(info.param.algo);
                         });

// All-to-all (both schedules), allToAllv, gather and scatter on device buffers.
class DeviceExchanges : public ::testing::TestWithParam<Case> {};

TEST_P(DeviceExchanges, EveryTypeCountAndPlacementMatchesTheReference) {
  BRAID_REQUIRE_GPU();
  const Case c = GetParam();
  runDeviceRanks(c.ranks, c.algo, [&](DeviceCommunicator& dc) {
    EXPECT_EQ(cudatest::checkDeviceExchanges(dc, c.algo), "");
  });
}

INSTANTIATE_TEST_SUITE_P(RanksAndAlgorithms, DeviceExchanges,
                         ::testing::Values(Case{1, Algorithm::kAuto}, Case{2, Algorithm::kAuto},
                                           Case{3, Algorithm::kOneShot},
                                           Case{3, Algorithm::kPairwise}, Case{4, Algorithm::kAuto},
                                           Case{5, Algorithm::kPairwise}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::to_string(info.param.ranks) + "ranks_" +
                                  algorithmName(info.param.algo);
                         });

TEST(DeviceCreate, AnUnavailableDeviceIsAUsageErrorNamingIt) {
  // Runs with or without a GPU: without one every device is unavailable; with one, device #count.
  const int device = cudatest::gpuCount();
  Options options;
  options.timeoutSeconds = 10;
  auto errors = testing::runRanks(2, options, [&](Communicator& host) {
    try {
      DeviceCommunicator::create(host, device, options);
      ADD_FAILURE() << "created on device " << device;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage) << e.what();
      EXPECT_NE(std::string(e.what()).find(fmt::format("rank {}", host.rank())), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(fmt::format("CUDA device {} unavailable", device)),
                std::string::npos)
          << e.what();
    }
    host.barrier();  // the host communicator is still usable
  });
  for (auto& e : errors) EXPECT_FALSE(e);
}

TEST(DeviceThreadsErrors, HostBufferIsRejectedAtTheCall) {
  BRAID_REQUIRE_GPU();
  runDeviceRanks(2, Algorithm::kAuto, [&](DeviceCommunicator& dc) {
    std::vector<float> host(16);
    try {
      dc.allReduce(host.data(), host.data(), 16, DataType::kFloat32, RedOp::kSum, CudaStream{});
      ADD_FAILURE() << "host buffer accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
      EXPECT_NE(std::string(e.what()).find("not CUDA device memory"), std::string::npos);
    }
    EXPECT_EQ(dc.asyncError(), ErrorCode::kOk) << "a usage error breaks nothing";
  });
}

TEST(DeviceThreadsErrors, AForcedAlgorithmThatCannotRunIsAUsageErrorAtTheCall) {
  BRAID_REQUIRE_GPU();
  runDeviceRanks(2, Algorithm::kChain, [&](DeviceCommunicator& dc) {
    cudatest::Device buf(4096);
    cudatest::Stream stream;
    try {
      dc.allReduce(buf.p, buf.p, 64, DataType::kFloat32, RedOp::kSum, stream.handle());
      ADD_FAILURE() << "chain all-reduce accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage) << e.what();
    }
    EXPECT_EQ(dc.asyncError(), ErrorCode::kOk);
    // Chain does broadcast: the communicator still works, with matching numbering on both ranks.
    dc.broadcast(buf.p, buf.p, 64, DataType::kFloat32, 0, stream.handle());
    EXPECT_EQ(cudaStreamSynchronize(stream.s), cudaSuccess);
    dc.synchronize();  // before cudaFree, which would wait for the peer's stream
  });
}

TEST(DeviceThreadsErrors, MismatchIsReportedAsynchronouslyOnEveryRank) {
  BRAID_REQUIRE_GPU();
  Options options;
  options.timeoutSeconds = 10;
  auto errors = testing::runRanks(2, options, [&](Communicator& host) {
    DeviceCommunicator dc = DeviceCommunicator::create(host, 0, options);
    cudatest::Device buf(4096);
    cudatest::Stream stream;
    // Rank 1 calls with another count: both ranks must end with kMismatch, never hang.
    dc.allReduce(buf.p, buf.p, dc.rank() == 0 ? 64 : 32, DataType::kFloat32, RedOp::kSum,
                 stream.handle());
    EXPECT_EQ(cudaStreamSynchronize(stream.s), cudaSuccess) << "the stream is released";
    try {
      dc.synchronize();
      ADD_FAILURE() << "rank " << dc.rank() << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kMismatch) << e.what();
    }
    EXPECT_THROW(dc.allReduce(buf.p, buf.p, 8, DataType::kFloat32, RedOp::kSum, stream.handle()),
                 Error)
        << "a broken communicator refuses new work";
  });
  for (auto& e : errors) EXPECT_FALSE(e);
}

TEST(DeviceThreadsErrors, ADeadPeerEndsInTimeoutOrRemoteErrorWithinTheTimeout) {
  BRAID_REQUIRE_GPU();
  Options options;
  options.timeoutSeconds = 2;
  const auto start = std::chrono::steady_clock::now();
  auto errors = testing::runRanks(2, options, [&](Communicator& host) {
    DeviceCommunicator dc = DeviceCommunicator::create(host, 0, options);
    cudatest::Device buf(4096);
    if (dc.rank() == 0) {
      dc.allReduce(buf.p, buf.p, 256, DataType::kFloat32, RedOp::kSum, CudaStream{});
      try {
        dc.synchronize();
        ADD_FAILURE() << "no error although the peer never called";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
        EXPECT_NE(std::string(e.what()).find("peer rank 1"), std::string::npos) << e.what();
      }
    } else {
      // Rank 1 never calls, but keeps its inbox until rank 0 has given up.
      std::this_thread::sleep_for(std::chrono::seconds(4));
    }
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  for (auto& e : errors) EXPECT_FALSE(e);
}

TEST(DeviceThreadsOrdering, TheCollectiveWaitsForPriorStreamWorkAndTheStreamWaitsForIt) {
  BRAID_REQUIRE_GPU();
  runDeviceRanks(2, Algorithm::kRing, [&](DeviceCommunicator& dc) {
    const size_t n = 1 << 20;
    cudatest::Device a(n * 4), b(n * 4);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    std::vector<float> ones(n, 1.0f), got(n);
    // Upload, reduce and download all enqueued on s without host synchronisation between them.
    ASSERT_EQ(cudaMemcpyAsync(a.p, ones.data(), n * 4, cudaMemcpyHostToDevice, s), cudaSuccess);
    for (int i = 0; i < 3; ++i) {
      dc.allReduce(a.p, b.p, n, DataType::kFloat32, RedOp::kSum, CudaStream{s});
      dc.allReduce(b.p, a.p, n, DataType::kFloat32, RedOp::kSum, CudaStream{s});
    }
    ASSERT_EQ(cudaMemcpyAsync(got.data(), a.p, n * 4, cudaMemcpyDeviceToHost, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    dc.checkAsyncError();
    for (size_t i = 0; i < n; ++i) {
      if (got[i] != 64.0f) {
        ADD_FAILURE() << "element " << i << " = " << got[i] << ", want 2^6";
        break;
      }
    }
    cudaStreamDestroy(s);
  });
}

}  // namespace
}  // namespace braid
