// How each *_perf binary calls its collective, blocking and non-blocking.
#include "bench/format/colls.h"
#include "bench/perf/driver.h"
#include "common/error.h"

namespace braid::bench {
namespace {

void run(Collective coll, Communicator& comm, const void* send, void* recv, size_t count,
         DataType type, RedOp op, int root) {
  switch (coll) {
    case Collective::kAllReduce:
      comm.allReduce(send, recv, count, type, op);
      break;
    case Collective::kReduceScatter:
      comm.reduceScatter(send, recv, count, type, op);
      break;
    case Collective::kAllGather:
      comm.allGather(send, recv, count, type);
      break;
    case Collective::kBroadcast:
      comm.broadcast(send, recv, count, type, root);
      break;
    case Collective::kReduce:
      comm.reduce(send, recv, count, type, op, root);
      break;
    case Collective::kAllToAll:
      comm.allToAll(send, recv, count, type);
      break;
    case Collective::kGather:
      comm.gather(send, recv, count, type, root);
      break;
    case Collective::kScatter:
      comm.scatter(send, recv, count, type, root);
      break;
    default:
      fail(ErrorCode::kInvalidUsage, "no bench for {}", collectiveName(coll));
  }
}

Request start(Collective coll, Communicator& comm, const void* send, void* recv, size_t count,
              DataType type, RedOp op, int root) {
  switch (coll) {
    case Collective::kAllReduce:
      return comm.allReduceAsync(send, recv, count, type, op);
    case Collective::kReduceScatter:
      return comm.reduceScatterAsync(send, recv, count, type, op);
    case Collective::kAllGather:
      return comm.allGatherAsync(send, recv, count, type);
    case Collective::kBroadcast:
      return comm.broadcastAsync(send, recv, count, type, root);
    case Collective::kReduce:
      return comm.reduceAsync(send, recv, count, type, op, root);
    case Collective::kAllToAll:
      return comm.allToAllAsync(send, recv, count, type);
    case Collective::kGather:
      return comm.gatherAsync(send, recv, count, type, root);
    case Collective::kScatter:
      return comm.scatterAsync(send, recv, count, type, root);
    default:
      fail(ErrorCode::kInvalidUsage, "no bench for {}", collectiveName(coll));
  }
}

template <Collective kColl>
void runAs(Communicator& comm, const void* send, void* recv, size_t count, DataType type, RedOp op,
           int root) {
  run(kColl, comm, send, recv, count, type, op, root);
}

template <Collective kColl>
Request startAs(Communicator& comm, const void* send, void* recv, size_t count, DataType type,
                RedOp op, int root) {
  return start(kColl, comm, send, recv, count, type, op, root);
}

template <Collective kColl>
CollRunner runner() {
  return CollRunner{collInfo(kColl), runAs<kColl>, startAs<kColl>};
}

}  // namespace

int benchMain(int argc, char** argv, Collective coll) {
  switch (coll) {
    case Collective::kAllReduce:
      return benchMain(argc, argv, runner<Collective::kAllReduce>());
    case Collective::kReduceScatter:
      return benchMain(argc, argv, runner<Collective::kReduceScatter>());
    case Collective::kAllGather:
      return benchMain(argc, argv, runner<Collective::kAllGather>());
    case Collective::kBroadcast:
      return benchMain(argc, argv, runner<Collective::kBroadcast>());
    case Collective::kReduce:
      return benchMain(argc, argv, runner<Collective::kReduce>());
    case Collective::kAllToAll:
      return benchMain(argc, argv, runner<Collective::kAllToAll>());
    case Collective::kGather:
      return benchMain(argc, argv, runner<Collective::kGather>());
    case Collective::kScatter:
      return benchMain(argc, argv, runner<Collective::kScatter>());
    default:
      return 2;
  }
}

}  // namespace braid::bench
