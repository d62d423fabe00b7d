// reduce_scatter_perf: nccl-tests' reduce_scatter_perf on braid. count is the per-rank receive
// count.
#include "bench/perf/colls.h"
#include "bench/perf/driver.h"

namespace {

using braid::Communicator;
using braid::DataType;
using braid::RedOp;
using braid::Request;

void run(Communicator& comm, const void* send, void* recv, size_t count, DataType type, RedOp op,
         int /*root*/) {
  comm.reduceScatter(send, recv, count, type, op);
}

Request start(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
              RedOp op, int /*root*/) {
  return comm.reduceScatterAsync(send, recv, count, type, op);
}

}  // namespace

int main(int argc, char** argv) {
  return braid::bench::benchMain(
      argc, argv, {braid::bench::collInfo(braid::Collective::kReduceScatter), run, start});
}
