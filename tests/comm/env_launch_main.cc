// A rank program for launcher tests: Communicator::fromEnvironment() (braidrun's variables or
// mpirun's), then an all-reduce checked element by element. Exit 0 when right.
#include <cstdio>
#include <vector>

#include "braid/braid.hpp"

int main() {
  try {
    auto comm = braid::Communicator::fromEnvironment();
    const int n = comm.size();
    std::vector<int> in(1003), out(1003);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i) * (comm.rank() + 1);
    comm.allReduce(in.data(), out.data(), in.size(), braid::DataType::kInt32, braid::RedOp::kSum);
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] != static_cast<int>(i) * n * (n + 1) / 2) {
        std::fprintf(stderr, "rank %d: element %zu is %d\n", comm.rank(), i, out[i]);
        return 1;
      }
    }
    comm.barrier();
    std::printf("rank %d of %d: ok\n", comm.rank(), n);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
