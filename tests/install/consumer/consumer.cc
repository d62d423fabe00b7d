// Installed braid's C++ API from a user's program: every rank sums rank-dependent int32 and float
// vectors of odd sizes (in and out of place) and checks every element; then each rank makes a
// communicator of its own over an in-memory store (braid/store.hpp) and sums on it.
#include <braid/braid.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    auto comm = braid::Communicator::fromEnvironment();
    const int n = comm.size(), r = comm.rank();
    for (size_t count : {size_t{1}, size_t{1031}, size_t{262147}}) {
      std::vector<int> in(count), out(count);
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<int>(i % 1000) * (r + 1);
      comm.allReduce(in.data(), out.data(), count, braid::DataType::kInt32, braid::RedOp::kSum);
      std::vector<float> f(count, static_cast<float>(r));
      comm.allReduce(f.data(), f.data(), count, braid::DataType::kFloat32, braid::RedOp::kMax);
      for (size_t i = 0; i < count; ++i) {
        if (out[i] != static_cast<int>(i % 1000) * n * (n + 1) / 2 || f[i] != n - 1) {
          std::fprintf(stderr, "consumer: rank %d: count %zu element %zu wrong (%d, %g)\n", r,
                       count, i, out[i], f[i]);
          return 1;
        }
      }
    }
    braid::Options solo;
    solo.secret = "consumer-secret";
    auto alone = braid::Communicator::fromStore(braid::makeInMemoryStore(), 0, 1, solo);
    int one = r + 1, sum = 0;
    alone.allReduce(&one, &sum, 1, braid::DataType::kInt32, braid::RedOp::kSum);
    if (sum != r + 1) {
      std::fprintf(stderr, "consumer: rank %d: its own communicator summed %d\n", r, sum);
      return 1;
    }
    std::printf("consumer (C++): rank %d of %d ok\n", r, n);
    return 0;
  } catch (const braid::Error& e) {
    std::fprintf(stderr, "consumer: %s (%s)\n", e.what(), braid::errorCodeName(e.code()));
    return 1;
  }
}
