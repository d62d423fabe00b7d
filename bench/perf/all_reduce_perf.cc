// all_reduce_perf: nccl-tests' all_reduce_perf on braid. Out-of-place when send != recv; in-place
// when send == recv.
#include "bench/perf/colls.h"
#include "bench/perf/driver.h"

namespace {

using braid::Communicator;
using braid::DataType;
using braid::RedOp;
using braid::Request;

void run(Communicator& comm, const void* send, void* recv, size_t count, DataType type, RedOp op,
         int /*root*/) {
  comm.allReduce(send, recv, count, type, op);
}

Request start(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
              RedOp op, int /*root*/) {
  return comm.allReduceAsync(send, recv, count, type, op);
}

}  // namespace

int main(int argc, char** argv) {
  return braid::bench::benchMain(
      argc, argv, {braid::bench::collInfo(braid::Collective::kAllReduce), run, start});
}
