// GPU presence for tests/cuda: every GPU test starts with BRAID_REQUIRE_GPU().
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "tests/support/skip.h"

namespace braid::cudatest {

/// Number of usable CUDA devices; 0 when there is no driver or no device (never throws).
inline int gpuCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace braid::cudatest

#define BRAID_REQUIRE_GPU()                                                         \
  do {                                                                              \
    if (::braid::cudatest::gpuCount() == 0) BRAID_SKIP_NO_DEVICE("no CUDA device"); \
  } while (0)
