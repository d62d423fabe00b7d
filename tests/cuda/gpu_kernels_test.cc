// The CUDA kernels against their CPU reference, bit for bit: every dtype x op, aligned and
// misaligned pointers, odd counts, fused second output and divisor, multi-source reduce.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/kernels.h"
#include "kernels/cuda/reference.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/gpu_util.h"

namespace braid {
namespace {

using cudatest::kAllOps;
using cudatest::kAllTypes;
using cudatest::randomBuffer;
using cudatest::sameBytes;
namespace kc = kernels::cuda;
namespace ref = kernels::cuda::reference;

/// A device buffer with room for a misaligning offset.
struct DevBuf {
  explicit DevBuf(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes + 64), cudaSuccess); }
  ~DevBuf() { cudaFree(p); }
  char* at(size_t off) { return static_cast<char*>(p) + off; }
  void* p = nullptr;
};

void upload(void* d, const std::vector<char>& h) {
  ASSERT_EQ(cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice), cudaSuccess);
}
std::vector<char> download(const void* d, size_t bytes) {
  std::vector<char> h(bytes);
  EXPECT_EQ(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

TEST(CudaKernels, ReduceCopyMatchesReferenceForEveryTypeOpAndAlignment) {
  BRAID_REQUIRE_GPU();
  for (DataType t : kAllTypes) {
    const size_t e = dataTypeSize(t);
    for (RedOp op : kAllOps) {
      for (size_t n : {size_t(1), size_t(31), size_t(4097), size_t(300001)}) {
        for (size_t misalign : {size_t(0), e}) {
          for (uint64_t divisor : {uint64_t(1), uint64_t(3)}) {
            auto a = randomBuffer(n, t, 7 + n), b = randomBuffer(n, t, 9 + n);
            DevBuf da(a.size()), db(b.size()), d0(a.size()), d1(a.size());
            upload(da.at(misalign), a);
            upload(db.at(0), b);
            ASSERT_EQ(kc::reduceCopyAsync(d0.at(misalign), d1.at(0), da.at(misalign), db.at(0), n,
                                          t, op, divisor, nullptr),
                      0);
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            std::vector<char> want(a.size());
            ref::reduceCopy(want.data(), nullptr, a.data(), b.data(), n, t, op, divisor);
            ASSERT_TRUE(sameBytes(download(d0.at(misalign), a.size()).data(), want.data(), n, t))
                << redOpName(op) << " n=" << n << " misalign=" << misalign;
            ASSERT_TRUE(sameBytes(download(d1.at(0), a.size()).data(), want.data(), n, t));
          }
        }
      }
    }
  }
}

TEST(CudaKernels, InPlaceReduceAndDivide) {
  BRAID_REQUIRE_GPU();
  for (DataType t : kAllTypes) {
    const size_t n = 10007;
    auto a = randomBuffer(n, t, 1), b = randomBuffer(n, t, 2);
    DevBuf da(a.size()), db(b.size());
    upload(da.p, a);
    upload(db.p, b);
    ASSERT_EQ(kc::reduceAsync(db.p, da.p, db.p, n, t, RedOp::kSum, nullptr), 0);
    ASSERT_EQ(kc::divideAsync(db.p, db.p, n, t, 4, nullptr), 0);
    std::vector<char> want(a.size());
    ref::reduceCopy(want.data(), nullptr, a.data(), b.data(), n, t, RedOp::kSum);
    ref::divide(want.data(), want.data(), n, t, 4);
    ASSERT_TRUE(sameBytes(download(db.p, b.size()).data(), want.data(), n, t));
  }
}

// scaleAsync (the NCCL API's PreMulSum) against kernels::scale, bit for bit, with the scalar
// given and read from device memory, in place and out of place.
TEST(CudaKernels, ScaleMatchesTheCpuKernel) {
  BRAID_REQUIRE_GPU();
  for (DataType t : kAllTypes) {
    const size_t e = dataTypeSize(t);
    for (size_t n : {size_t(1), size_t(4097)}) {
      for (double scalar : {0.5, 3.0, -1.25}) {
        auto a = randomBuffer(n, t, 5 + n);
        DevBuf da(a.size()), dout(a.size()), dscalar(8);
        upload(da.p, a);
        std::vector<char> want(a.size());
        kernels::scale(want.data(), a.data(), n, t, scalar);
        ASSERT_EQ(kc::scaleAsync(dout.p, da.p, n, t, scalar, nullptr, nullptr), 0);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        ASSERT_TRUE(sameBytes(download(dout.p, a.size()).data(), want.data(), n, t))
            << dataTypeName(t) << " x " << scalar;
        // The scalar as one element of the type in device memory, read by the kernel, in place.
        std::vector<char> s(e);
        kernels::storeElement(t, s.data(), 0, scalar);
        upload(dscalar.p, s);
        std::vector<char> wantAt(a.size());
        kernels::scale(wantAt.data(), a.data(), n, t, kernels::loadElement(t, s.data(), 0));
        ASSERT_EQ(kc::scaleAsync(da.p, da.p, n, t, 0.0, dscalar.p, nullptr), 0);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        ASSERT_TRUE(sameBytes(download(da.p, a.size()).data(), wantAt.data(), n, t))
            << dataTypeName(t) << " x *" << scalar;
      }
    }
  }
}

TEST(CudaKernels, ReduceManyMatchesReference) {
  BRAID_REQUIRE_GPU();
  for (DataType t : kAllTypes) {
    for (RedOp op : kAllOps) {
      for (int nsrc : {1, 2, 5, 8}) {
        const size_t n = 70001;
        std::vector<std::vector<char>> h;
        std::vector<std::unique_ptr<DevBuf>> d;
        std::vector<const void*> hs, ds;
        for (int k = 0; k < nsrc; ++k) {
          h.push_back(randomBuffer(n, t, 50 + k));
          d.push_back(std::make_unique<DevBuf>(h.back().size()));
          upload(d.back()->p, h.back());
          hs.push_back(h.back().data());
          ds.push_back(d.back()->p);
        }
        DevBuf out(h[0].size());
        ASSERT_EQ(kc::reduceManyAsync(out.p, ds.data(), nsrc, n, t, op, 1, nullptr), 0);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<char> want(h[0].size());
        ref::reduceMany(want.data(), hs.data(), nsrc, n, t, op);
        ASSERT_TRUE(sameBytes(download(out.p, want.size()).data(), want.data(), n, t))
            << redOpName(op) << " nsrc=" << nsrc;
      }
    }
  }
}

TEST(CudaKernels, CopyToOneAndTwoDestinations) {
  BRAID_REQUIRE_GPU();
  for (size_t bytes : {size_t(1), size_t(15), size_t(4096), size_t(1000003)}) {
    auto src = randomBuffer(bytes, DataType::kUint8, 3);
    DevBuf s(bytes), a(bytes), b(bytes);
    upload(s.at(1), src);
    ASSERT_EQ(kc::copyAsync(a.at(1), b.at(0), s.at(1), bytes, nullptr), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(download(a.at(1), bytes), src);
    EXPECT_EQ(download(b.at(0), bytes), src);
    ASSERT_EQ(kc::copyAsync(a.at(0), nullptr, s.at(1), bytes, nullptr), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(download(a.at(0), bytes), src);
  }
}

TEST(CudaKernels, RejectsBadArgumentsWithoutAGpu) {
  EXPECT_THROW(kc::reduceCopyAsync(nullptr, nullptr, nullptr, nullptr, 1, static_cast<DataType>(77),
                                   RedOp::kSum, 1, nullptr),
               std::invalid_argument);
  EXPECT_THROW(
      kc::reduceManyAsync(nullptr, nullptr, 0, 1, DataType::kFloat32, RedOp::kSum, 1, nullptr),
      std::invalid_argument);
  EXPECT_THROW(kc::divideAsync(nullptr, nullptr, 1, DataType::kFloat32, 0, nullptr),
               std::invalid_argument);
  EXPECT_EQ(kc::reduceAsync(nullptr, nullptr, nullptr, 0, DataType::kFloat32, RedOp::kSum, nullptr),
            0)
      << "count 0 launches nothing";
}

}  // namespace
}  // namespace braid
