// One allToAllv case of the test kit: rank r's layout for a per-pair count, blocks packed in rank
// order, its float32 input and the check of what it received. Shared by the device
// communicator's exchanges (tests/cuda/device_case.h) and the ticketed queue (tests/comm).
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string>
#include <vector>

namespace braid::testing {

struct AllToAllvCase {
  int rank, size;
  std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;
  /// One element longer than the blocks need (never empty); `out` starts at -1 everywhere.
  std::vector<float> in, out;

  /// Rank r of n sending countOf(r, q) elements to each rank q and receiving countOf(q, r).
  AllToAllvCase(int r, int n, const std::function<size_t(int, int)>& countOf)
      : rank(r), size(n), sendCounts(n), sendDispls(n), recvCounts(n), recvDispls(n) {
    size_t inCount = 0, outCount = 0;
    for (int q = 0; q < n; ++q) {
      sendCounts[q] = countOf(r, q);
      sendDispls[q] = inCount;
      inCount += sendCounts[q];
      recvCounts[q] = countOf(q, r);
      recvDispls[q] = outCount;
      outCount += recvCounts[q];
    }
    in.assign(inCount + 1, 0.0f);
    out.assign(outCount + 1, -1.0f);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < sendCounts[q]; ++i) in[sendDispls[q] + i] = value(r, q, i);
  }

  /// Element i of the block from rank `from` to rank `to` (exact in float32 for up to 100
  /// ranks and blocks under 10000 elements).
  static float value(int from, int to, size_t i) {
    return float(from * 100000 + to * 10000 + int(i));
  }

  /// "" when every received element is right, else the first wrong one.
  std::string check(const std::string& what) const {
    for (int q = 0; q < size; ++q)
      for (size_t i = 0; i < recvCounts[q]; ++i)
        if (out[recvDispls[q] + i] != value(q, rank, i))
          return fmt::format("rank {}: allToAllv ({}): element {} of the {} from rank {} is {}",
                             rank, what, i, recvCounts[q], q, out[recvDispls[q] + i]);
    return "";
  }
};

}  // namespace braid::testing
