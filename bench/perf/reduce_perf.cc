// reduce_perf: nccl-tests' reduce_perf on braid. recv is written on the root only.
#include "bench/perf/colls.h"
#include "bench/perf/driver.h"

namespace {

using braid::Communicator;
using braid::DataType;
using braid::RedOp;
using braid::Request;

void run(Communicator& comm, const void* send, void* recv, size_t count, DataType type, RedOp op,
         int root) {
  comm.reduce(send, recv, count, type, op, root);
}

Request start(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
              RedOp op, int root) {
  return comm.reduceAsync(send, recv, count, type, op, root);
}

}  // namespace

int main(int argc, char** argv) {
  return braid::bench::benchMain(argc, argv,
                                 {braid::bench::collInfo(braid::Collective::kReduce), run, start});
}
