// all_gather_perf: nccl-tests' all_gather_perf on braid. count is the per-rank send count.
#include "bench/perf/colls.h"
#include "bench/perf/driver.h"

namespace {

using braid::Communicator;
using braid::DataType;
using braid::RedOp;
using braid::Request;

void run(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
         RedOp /*op*/, int /*root*/) {
  comm.allGather(send, recv, count, type);
}

Request start(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
              RedOp /*op*/, int /*root*/) {
  return comm.allGatherAsync(send, recv, count, type);
}

}  // namespace

int main(int argc, char** argv) {
  return braid::bench::benchMain(
      argc, argv, {braid::bench::collInfo(braid::Collective::kAllGather), run, start});
}
