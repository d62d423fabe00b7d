// The collective matrix through braid's libnccl.so.2: one NCCL call per test-kit case, and the
// cases; for host buffers (collectives_test.cc) and device buffers (device_test.cc).
#pragma once

#include <nccl.h>

#include <vector>

#include "tests/kit/host_case.h"

namespace braid::nccltest {

/// The NCCL call of case `c` on `stream` (nullptr: host buffers, braid's extension).
inline ncclResult_t callNccl(ncclComm_t comm, const testing::CollectiveCase& c, const void* send,
                             void* recv, cudaStream_t stream = nullptr) {
  const auto t = static_cast<ncclDataType_t>(c.type);
  const auto op = static_cast<ncclRedOp_t>(c.op);
  switch (c.coll) {
    case Collective::kAllReduce:
      return ncclAllReduce(send, recv, c.count, t, op, comm, stream);
    case Collective::kReduceScatter:
      return ncclReduceScatter(send, recv, c.count, t, op, comm, stream);
    case Collective::kAllGather:
      return ncclAllGather(send, recv, c.count, t, comm, stream);
    case Collective::kBroadcast:
      return ncclBroadcast(send, recv, c.count, t, c.root, comm, stream);
    case Collective::kAllToAll:
      return ncclAlltoAll(send, recv, c.count, t, comm, stream);
    case Collective::kGather:
      return ncclGather(send, recv, c.count, t, c.root, comm, stream);
    case Collective::kScatter:
      return ncclScatter(send, recv, c.count, t, c.root, comm, stream);
    default:
      return ncclReduce(send, recv, c.count, t, op, c.root, comm, stream);
  }
}

/// Every scheduled and exchange collective in `types` x `ops` (data movers with sum only),
/// counts 0, 1, 13 and 1031, in place and out of place, root n-1.
inline std::vector<testing::CollectiveCase> casesFor(int n, const std::vector<DataType>& types,
                                                     const std::vector<RedOp>& ops) {
  std::vector<Collective> colls(std::begin(testing::kScheduledCollectives),
                                std::end(testing::kScheduledCollectives));
  colls.insert(colls.end(), std::begin(testing::kExchangeCollectives),
               std::end(testing::kExchangeCollectives));
  std::vector<testing::CollectiveCase> cases;
  for (Collective coll : colls)
    for (DataType t : types)
      for (RedOp op : ops) {
        if (!reduces(coll) && op != RedOp::kSum) continue;
        for (size_t count : {size_t(0), size_t(1), size_t(13), size_t(1031)})
          for (bool inPlace : {false, true}) cases.push_back({coll, t, op, count, inPlace, n - 1});
      }
  return cases;
}

}  // namespace braid::nccltest
