// The CUDA kernels' CPU reference (kernels/cuda/reference.h) against the CPU kernels: both are
// built on kernels/element_ops.h, and the GPU kernels are checked against this reference on a
// GPU, so this ties GPU results to the host path bit for bit.
#include "kernels/cuda/reference.h"

#include <gtest/gtest.h>

#include "kernels/kernels.h"
#include "tests/cuda/cuda_test_util.h"

namespace braid {
namespace {

using cudatest::kAllOps;
using cudatest::kAllTypes;
using cudatest::randomBuffer;
using cudatest::sameBytes;
namespace ref = kernels::cuda::reference;

TEST(CudaReference, ReduceCopyEqualsCpuKernelsForEveryTypeAndOp) {
  for (DataType t : kAllTypes) {
    for (RedOp op : kAllOps) {
      for (size_t n : {size_t(1), size_t(7), size_t(1000), size_t(4099)}) {
        auto a = randomBuffer(n, t, 1 + n), b = randomBuffer(n, t, 2 + n);
        std::vector<char> want(a.size()), got0(a.size()), got1(a.size());
        kernels::reduce(want.data(), a.data(), b.data(), n, t, op);
        ref::reduceCopy(got0.data(), got1.data(), a.data(), b.data(), n, t, op);
        ASSERT_TRUE(sameBytes(got0.data(), want.data(), n, t)) << redOpName(op) << " n=" << n;
        ASSERT_TRUE(sameBytes(got1.data(), want.data(), n, t)) << redOpName(op) << " n=" << n;
      }
    }
  }
}

TEST(CudaReference, FusedDivideEqualsReduceThenDivide) {
  for (DataType t : kAllTypes) {
    for (uint64_t divisor : {uint64_t(2), uint64_t(3), uint64_t(7)}) {
      const size_t n = 513;
      auto a = randomBuffer(n, t, 11), b = randomBuffer(n, t, 12);
      std::vector<char> want(a.size()), got(a.size());
      kernels::reduce(want.data(), a.data(), b.data(), n, t, RedOp::kAvg);
      kernels::divide(want.data(), want.data(), n, t, divisor);
      ref::reduceCopy(got.data(), nullptr, a.data(), b.data(), n, t, RedOp::kAvg, divisor);
      ASSERT_TRUE(sameBytes(got.data(), want.data(), n, t)) << "divisor " << divisor;
      ref::divide(got.data(), a.data(), n, t, divisor);
      kernels::divide(want.data(), a.data(), n, t, divisor);
      ASSERT_TRUE(sameBytes(got.data(), want.data(), n, t)) << "divide by " << divisor;
    }
  }
}

TEST(CudaReference, ReduceManyEqualsCpuKernelsInRankOrder) {
  for (DataType t : kAllTypes) {
    for (RedOp op : kAllOps) {
      for (int nsrc : {1, 2, 3, 8}) {
        const size_t n = 257;
        std::vector<std::vector<char>> bufs;
        std::vector<const void*> srcs;
        for (int k = 0; k < nsrc; ++k) bufs.push_back(randomBuffer(n, t, 100 + k));
        for (auto& b : bufs) srcs.push_back(b.data());
        std::vector<char> want(bufs[0].size()), got(bufs[0].size());
        kernels::reduceMany(want.data(), srcs.data(), nsrc, n, t, op);
        ref::reduceMany(got.data(), srcs.data(), nsrc, n, t, op);
        ASSERT_TRUE(sameBytes(got.data(), want.data(), n, t)) << redOpName(op) << " nsrc=" << nsrc;
      }
    }
  }
}

TEST(CudaReference, OutputMayAliasAnInput) {
  const size_t n = 100;
  auto a = randomBuffer(n, DataType::kFloat32, 5), b = randomBuffer(n, DataType::kFloat32, 6);
  std::vector<char> want(a.size());
  kernels::reduce(want.data(), a.data(), b.data(), n, DataType::kFloat32, RedOp::kSum);
  ref::reduceCopy(b.data(), nullptr, a.data(), b.data(), n, DataType::kFloat32, RedOp::kSum);
  EXPECT_TRUE(sameBytes(b.data(), want.data(), n, DataType::kFloat32));
}

}  // namespace
}  // namespace braid
