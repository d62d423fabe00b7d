// broadcast_perf: nccl-tests' broadcast_perf on braid. send is read on the root only.
#include "bench/perf/colls.h"
#include "bench/perf/driver.h"

namespace {

using braid::Communicator;
using braid::DataType;
using braid::RedOp;
using braid::Request;

void run(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
         RedOp /*op*/, int root) {
  comm.broadcast(send, recv, count, type, root);
}

Request start(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
              RedOp /*op*/, int root) {
  return comm.broadcastAsync(send, recv, count, type, root);
}

}  // namespace

int main(int argc, char** argv) {
  return braid::bench::benchMain(
      argc, argv, {braid::bench::collInfo(braid::Collective::kBroadcast), run, start});
}
