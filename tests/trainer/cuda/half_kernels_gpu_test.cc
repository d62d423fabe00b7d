// fp16's kernels against the CPU: float -> half -> float against the CPU path's conversions
// (kernels/convert.h, bit for bit), the half gradient added into float32, and the unscale with
// its inf/NaN flag.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/convert.h"
#include "tests/trainer/cuda/gpu_check.h"
#include "trainer/cuda/cuda_check.h"
#include "trainer/cuda/half_kernels.h"

namespace braid::trainer::cuda {
namespace {

using gputest::randomFloats;

// Random values with the edges of the half range: subnormals, overflow to inf, a NaN.
std::vector<float> edgyFloats() {
  std::vector<float> v = randomFloats(1000, 61, -70000.0f, 70000.0f);
  const auto small = randomFloats(1000, 62, -1e-3f, 1e-3f);
  v.insert(v.end(), small.begin(), small.end());
  for (float x :
       {0.0f, -0.0f, 65504.0f, 65520.0f, -1e9f, 6e-8f, 3e-8f, 1e-10f,
        std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    v.push_back(x);
  }
  return v;
}

// A device array of halves from host floats, converted on the device.
struct HalfArray {
  DeviceBuffer<float> f;
  DeviceBuffer<__half> h;
  HalfArray(const std::vector<float>& v, const CudaContext& ctx)
      : f(v.size(), "test floats"), h(v.size(), "test halves") {
    copyToDevice(f.data(), v.data(), v.size(), ctx.stream());
    floatToHalf(f.data(), h.data(), v.size(), ctx.stream());
  }
};

std::vector<float> cpuRoundTrip(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  std::vector<float> back(v.size());
  kernels::detail::floatToHalfN(h.data(), v.data(), v.size());
  kernels::detail::halfToFloatN(back.data(), h.data(), v.size());
  return back;
}

bool sameValue(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

TEST(HalfKernels, RoundTripMatchesTheCpuConversion) {
  BRAID_REQUIRE_TRAINER_GPU();
  CudaContext ctx(gputest::exactOptions());
  const std::vector<float> v = edgyFloats();
  HalfArray a(v, ctx);
  DeviceBuffer<float> back(v.size(), "round trip");
  halfToFloat(a.h.data(), back.data(), v.size(), ctx.stream());
  std::vector<float> got(v.size());
  copyToHost(got.data(), back.data(), v.size(), ctx.stream());
  ctx.synchronize();
  const std::vector<float> want = cpuRoundTrip(v);
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_TRUE(sameValue(got[i], want[i]))
        << i << ": " << v[i] << " -> " << got[i] << ", want " << want[i];
  }
}

TEST(HalfKernels, AddHalfToFloatAdds) {
  BRAID_REQUIRE_TRAINER_GPU();
  CudaContext ctx(gputest::exactOptions());
  const std::vector<float> v = randomFloats(3000, 63, -100.0f, 100.0f);
  const std::vector<float> base = randomFloats(3000, 64);
  HalfArray a(v, ctx);
  DeviceBuffer<float> out(base.size(), "sums");
  copyToDevice(out.data(), base.data(), base.size(), ctx.stream());
  addHalfToFloat(a.h.data(), out.data(), v.size(), ctx.stream());
  std::vector<float> got(v.size());
  copyToHost(got.data(), out.data(), v.size(), ctx.stream());
  ctx.synchronize();
  const std::vector<float> halves = cpuRoundTrip(v);
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(got[i], base[i] + halves[i]) << i;
}

// The unscaled values and the flag for halves of `v` divided by `scale`.
struct Unscaled {
  std::vector<float> values;
  int32_t overflow;
};

Unscaled unscale(const std::vector<float>& v, float scale, const CudaContext& ctx) {
  HalfArray a(v, ctx);
  DeviceBuffer<float> out(v.size(), "unscaled");
  DeviceBuffer<int32_t> flag(1, "flag");
  BRAID_CUDA_CHECK(cudaMemsetAsync(flag.data(), 0, sizeof(int32_t), ctx.stream()), "flag");
  unscaleHalf(a.h.data(), out.data(), v.size(), scale, flag.data(), ctx.stream());
  Unscaled u{std::vector<float>(v.size()), 0};
  copyToHost(u.values.data(), out.data(), v.size(), ctx.stream());
  BRAID_CUDA_CHECK(cudaMemcpyAsync(&u.overflow, flag.data(), sizeof(int32_t),
                                   cudaMemcpyDeviceToHost, ctx.stream()),
                   "flag");
  ctx.synchronize();
  return u;
}

TEST(HalfKernels, UnscaleDividesAndFlagsInfAndNaN) {
  BRAID_REQUIRE_TRAINER_GPU();
  CudaContext ctx(gputest::exactOptions());
  std::vector<float> v = randomFloats(5000, 65, -60000.0f, 60000.0f);
  const float scale = 1024.0f;
  const Unscaled ok = unscale(v, scale, ctx);
  EXPECT_EQ(ok.overflow, 0);
  const std::vector<float> halves = cpuRoundTrip(v);
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(ok.values[i], halves[i] / scale) << i;

  v[4321] = 1e6f;  // beyond the half range: inf
  EXPECT_EQ(unscale(v, scale, ctx).overflow, 1);
  v[4321] = 1.0f;
  v[17] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(unscale(v, scale, ctx).overflow, 1);
  v[17] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(unscale(v, scale, ctx).overflow, 1);
}

}  // namespace
}  // namespace braid::trainer::cuda
