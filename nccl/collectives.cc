// The collectives and send/recv: each call checks its arguments, decides the path (device
// buffers: braid's DeviceCommunicator on `stream`; host buffers with stream NULL: braid's host
// Communicator, braid's extension) and submits one Op (group.h).
#include <fmt/format.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "errors.h"
#include "export.h"
#include "group.h"
#include "memory.h"
#include "premul.h"
#include "vocabulary.h"

using namespace braid::nccl;
using braid::Communicator;
using braid::CudaStream;
using braid::DataType;
using braid::DeviceCommunicator;
using braid::RedOp;
using braid::Request;

namespace {

/// An Op for `call` on comm with its path decided from the buffers and the stream.
Op prepare(ncclComm_t comm, const char* call, const void* send, const void* recv,
           cudaStream_t stream) {
  Op op;
  op.comm = CommRef(comm, call);
  op.call = call;
  op.stream = CudaStream{stream};
  const int rank = op.comm->settings.rank;
  const bool sendOnDevice = isDeviceMemory(send), recvOnDevice = isDeviceMemory(recv);
  if (send != nullptr && recv != nullptr && sendOnDevice != recvOnDevice) {
    argumentError(fmt::format("rank {}: {}: the send buffer is {} memory, the receive buffer {}",
                              rank, call, sendOnDevice ? "device" : "host",
                              recvOnDevice ? "device" : "host"));
  }
  if (sendOnDevice || recvOnDevice) {
    op.onDevice = true;
  } else if (stream != nullptr) {
    if (send != nullptr || recv != nullptr) {
      argumentError(fmt::format("rank {}: {}: host buffers with a CUDA stream: braid runs host "
                                "buffers only with stream NULL",
                                rank, call));
    }
    op.onDevice = true;  // no buffers (count 0) on a stream: the device path keeps the order
  }
  return op;
}

void checkRoot(const Op& op, int root, const char* what) {
  const CommSettings& s = op.comm->settings;
  if (root < 0 || root >= s.size) {
    argumentError(fmt::format("rank {}: {}: {} {} is outside 0..{}", s.rank, op.call, what, root,
                              s.size - 1));
  }
}

void checkBuffer(const Op& op, const void* buf, size_t count, const char* which) {
  if (buf == nullptr && count > 0) {
    argumentError(fmt::format("rank {}: {} of {} elements: {} is NULL", op.comm->settings.rank,
                              op.call, count, which));
  }
}

/// The reduction a call asks for: a built-in op, or a PreMulSum of this communicator (a sum of
/// scaled inputs).
struct Reduction {
  RedOp op = RedOp::kSum;
  std::optional<PreMulSum> preMul;
};

Reduction reductionOf(const Op& call, ncclRedOp_t op, DataType type) {
  if (int(op) < ncclNumOps) return {builtinOpOf(op, call.call), std::nullopt};
  const int rank = call.comm->settings.rank;
  std::optional<PreMulSum> preMul = call.comm->preMulSum(op);
  if (!preMul) {
    argumentError(fmt::format("rank {}: {}: unknown reduction op {} (not made by "
                              "ncclRedOpCreatePreMulSum on this communicator)",
                              rank, call.call, int(op)));
  }
  if (preMul->type != type) {
    argumentError(fmt::format("rank {}: {}: op {} was made for {}, called with {}", rank,
                              call.call, int(op), braid::dataTypeName(preMul->type),
                              braid::dataTypeName(type)));
  }
  if (!call.onDevice && preMul->scalarAt != nullptr && isDeviceMemory(preMul->scalarAt)) {
    argumentError(fmt::format("rank {}: {}: op {} reads its scalar from device memory, the "
                              "buffers are host memory (braid's host path cannot read it)",
                              rank, call.call, int(op)));
  }
  return {RedOp::kSum, preMul};
}

/// The input a reducing host op reads: `send` itself, or its scaled copy in op.scratch
/// (made when the op runs, which reads a ncclScalarDevice scalar then).
std::function<const void*()> inputOf(Op& op, const Reduction& r, const void* send, size_t count,
                                     DataType type) {
  if (!r.preMul) return [send] { return send; };
  auto scratch = std::make_shared<std::vector<char>>();
  op.scratch = scratch;
  PreMulSum preMul = *r.preMul;
  return [=] { return scaleInto(*scratch, send, count, type, scalarOf(preMul)); };
}

}  // namespace

extern "C" ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream) {
  return guard([&] {
    Op o = prepare(comm, "ncclAllReduce", sendbuff, recvbuff, stream);
    const DataType t = dataTypeOf(datatype, o.call);
    checkBuffer(o, sendbuff, count, "sendbuff");
    checkBuffer(o, recvbuff, count, "recvbuff");
    const Reduction r = reductionOf(o, op, t);
    auto input = inputOf(o, r, sendbuff, count, t);
    o.postHost = [=](Communicator& c) { return c.allReduceAsync(input(), recvbuff, count, t, r.op); };
    o.enqueueDevice = [=](DeviceCommunicator& d, CudaStream s) {
      const DeviceInput in(sendbuff, count, t, r.preMul, s.handle);
      d.allReduce(in.get(), recvbuff, count, t, r.op, s);
    };
    submit(std::move(o));
  });
}
BRAID_NCCL_ALIAS(ncclAllReduce)

extern "C" ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                   ncclDataType_t datatype, ncclRedOp_t op, int root,
                                   ncclComm_t comm, cudaStream_t stream) {
  return guard([&] {
    Op o = prepare(comm, "ncclReduce", sendbuff, recvbuff, stream);
    const DataType t = dataTypeOf(datatype, o.call);
    checkRoot(o, root, "root");
    checkBuffer(o, sendbuff, count, "sendbuff");
    if (o.comm->settings.rank == root) checkBuffer(o, recvbuff, count, "recvbuff (root)");
    const Reduction r = reductionOf(o, op, t);
    auto input = inputOf(o, r, sendbuff, count, t);
    o.postHost = [=](Communicator& c) {
      return c.reduceAsync(input(), recvbuff, count, t, r.op, root);
    };
    o.enqueueDevice = [=](DeviceCommunicator& d, CudaStream s) {
      const DeviceInput in(sendbuff, count, t, r.preMul, s.handle);
      d.reduce(in.get(), recvbuff, count, t, r.op, root, s);
    };
    submit(std::move(o));
  });
}
BRAID_NCCL_ALIAS(ncclReduce)

extern "C" ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                          ncclDataType_t datatype, ncclRedOp_t op,
                                          ncclComm_t comm, cudaStream_t stream) {
  return guard([&] {
    Op o = prepare(comm, "ncclReduceScatter", sendbuff, recvbuff, stream);
    const DataType t = dataTypeOf(datatype, o.call);
    const size_t sendcount = recvcount * size_t(o.comm->settings.size);
    checkBuffer(o, sendbuff, sendcount, "sendbuff");
    checkBuffer(o, recvbuff, recvcount, "recvbuff");
    const Reduction r = reductionOf(o, op, t);
    auto input = inputOf(o, r, sendbuff, sendcount, t);
    o.postHost = [=](Communicator& c) {
      return c.reduceScatterAsync(input(), recvbuff, recvcount, t, r.op);
    };
    o.enqueueDevice = [=](DeviceCommunicator& d, CudaStream s) {
      const DeviceInput in(sendbuff, sendcount, t, r.preMul, s.handle);
      d.reduceScatter(in.get(), recvbuff, recvcount, t, r.op, s);
    };
    submit(std::move(o));
  });
}
BRAID_NCCL_ALIAS(ncclReduceScatter)

extern "C" ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                      ncclDataType_t datatype, ncclComm_t comm,
                                      cudaStream_t stream) {
  return guard([&] {
    Op o = prepare(comm, "ncclAllGather", sendbuff, recvbuff, stream);
    const DataType t = dataTypeOf(datatype, o.call);
    checkBuffer(o, sendbuff, sendcount, "sendbuff");
    checkBuffer(o, recvbuff, sendcount * size_t(o.comm->settings.size), "recvbuff");
    o.postHost = [=](Communicator& c) { return c.allGatherAsync(sendbuff, recvbuff, sendcount, t); };
    o.enqueueDevice = [=](DeviceCommunicator& d, CudaStream s) {
      d.allGather(sendbuff, recvbuff, sendcount, t, s);
    };
    submit(std::move(o));
  });
}
BRAID_NCCL_ALIAS(ncclAllGather)

namespace {

/// All-to-all, gather and scatter. Checks the root (root >= 0) and the buffers this rank uses
/// (`sendCount`/`recvCount` elements of comm's rank count and root; 0 where it uses none), then
/// submits post(communicator, type) for host buffers or enqueue(device communicator, type,
/// stream) for device ones.
ncclResult_t exchange(const char* call, const void* sendbuff, void* recvbuff,
                      ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
                      const std::function<size_t(int size, bool atRoot)>& sendCount,
                      const std::function<size_t(int size, bool atRoot)>& recvCount,
                      std::function<Request(Communicator&, DataType)> post,
                      std::function<void(DeviceCommunicator&, DataType, CudaStream)> enqueue) {
  return guard([&] {
    Op o = prepare(comm, call, sendbuff, recvbuff, stream);
    const DataType t = dataTypeOf(datatype, o.call);
    if (root >= 0) checkRoot(o, root, "root");
    const int size = o.comm->settings.size;
    const bool atRoot = o.comm->settings.rank == root;
    checkBuffer(o, sendbuff, sendCount(size, atRoot), atRoot ? "sendbuff (root)" : "sendbuff");
    checkBuffer(o, recvbuff, recvCount(size, atRoot), atRoot ? "recvbuff (root)" : "recvbuff");
    o.postHost = [post = std::move(post), t](Communicator& c) { return post(c, t); };
    o.enqueueDevice = [enqueue = std::move(enqueue), t](DeviceCommunicator& d, CudaStream s) {
      enqueue(d, t, s);
    };
    submit(std::move(o));
  });
}

}  // namespace

extern "C" ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, ncclComm_t comm,
                                     cudaStream_t stream) {
  auto all = [count](int size, bool) { return count * size_t(size); };
  return exchange(
      "ncclAlltoAll", sendbuff, recvbuff, datatype, -1, comm, stream, all, all,
      [=](Communicator& c, DataType t) { return c.allToAllAsync(sendbuff, recvbuff, count, t); },
      [=](DeviceCommunicator& d, DataType t, CudaStream s) {
        d.allToAll(sendbuff, recvbuff, count, t, s);
      });
}
BRAID_NCCL_ALIAS(ncclAlltoAll)

namespace {

/// Gather (the root receives count elements per rank) or scatter (the root sends them).
ncclResult_t rooted(bool scatter, const void* sendbuff, void* recvbuff, size_t count,
                    ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  using Count = std::function<size_t(int, bool)>;
  const Count own = [count](int, bool) { return count; };
  const Count rootOnly = [count](int size, bool atRoot) {
    return atRoot ? count * size_t(size) : 0;
  };
  return exchange(
      scatter ? "ncclScatter" : "ncclGather", sendbuff, recvbuff, datatype, root, comm, stream,
      scatter ? rootOnly : own, scatter ? own : rootOnly,
      [=](Communicator& c, DataType t) {
        return scatter ? c.scatterAsync(sendbuff, recvbuff, count, t, root)
                       : c.gatherAsync(sendbuff, recvbuff, count, t, root);
      },
      [=](DeviceCommunicator& d, DataType t, CudaStream s) {
        if (scatter) {
          d.scatter(sendbuff, recvbuff, count, t, root, s);
        } else {
          d.gather(sendbuff, recvbuff, count, t, root, s);
        }
      });
}

}  // namespace

extern "C" ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                   ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream) {
  return rooted(false, sendbuff, recvbuff, count, datatype, root, comm, stream);
}
BRAID_NCCL_ALIAS(ncclGather)

extern "C" ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, int root, ncclComm_t comm,
                                    cudaStream_t stream) {
  return rooted(true, sendbuff, recvbuff, count, datatype, root, comm, stream);
}
BRAID_NCCL_ALIAS(ncclScatter)

extern "C" ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                      ncclDataType_t datatype, int root, ncclComm_t comm,
                                      cudaStream_t stream) {
  return guard([&] {
    Op o = prepare(comm, "ncclBroadcast", sendbuff, recvbuff, stream);
    const DataType t = dataTypeOf(datatype, o.call);
    checkRoot(o, root, "root");
    if (o.comm->settings.rank == root) checkBuffer(o, sendbuff, count, "sendbuff (root)");
    checkBuffer(o, recvbuff, count, "recvbuff");
    o.postHost = [=](Communicator& c) { return c.broadcastAsync(sendbuff, recvbuff, count, t, root); };
    o.enqueueDevice = [=](DeviceCommunicator& d, CudaStream s) {
      d.broadcast(sendbuff, recvbuff, count, t, root, s);
    };
    submit(std::move(o));
  });
}
BRAID_NCCL_ALIAS(ncclBroadcast)

extern "C" ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                  ncclComm_t comm, cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
BRAID_NCCL_ALIAS(ncclBcast)

namespace {

/// ncclSend (send = true) and ncclRecv: one buffer, a peer.
ncclResult_t pointToPoint(bool send, void* buf, size_t count, ncclDataType_t datatype, int peer,
                          ncclComm_t comm, cudaStream_t stream) {
  return guard([&] {
    const char* call = send ? "ncclSend" : "ncclRecv";
    Op o = prepare(comm, call, send ? buf : nullptr, send ? nullptr : buf, stream);
    const DataType t = dataTypeOf(datatype, call);
    checkRoot(o, peer, "peer");
    checkBuffer(o, buf, count, send ? "sendbuff" : "recvbuff");
    if (peer == o.comm->settings.rank) {
      if (!inGroup()) {
        throw braid::Error(braid::ErrorCode::kInvalidUsage,
                    fmt::format("rank {}: {} of {} elements to this rank itself: only inside "
                                "ncclGroupStart/ncclGroupEnd, with its matching {} (as NCCL)",
                                peer, call, count, send ? "ncclRecv" : "ncclSend"));
      }
      o.self = Op::Self{send, buf, count * dataTypeSize(t)};
      submit(std::move(o));
      return;
    }
    o.postHost = [=](Communicator& c) {
      return send ? c.sendAsync(buf, count, t, peer) : c.recvAsync(buf, count, t, peer);
    };
    o.enqueueDevice = [=](DeviceCommunicator& d, CudaStream s) {
      if (send) {
        d.send(buf, count, t, peer, s);
      } else {
        d.recv(buf, count, t, peer, s);
      }
    };
    submit(std::move(o));
  });
}

}  // namespace

extern "C" ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                                 int peer, ncclComm_t comm, cudaStream_t stream) {
  return pointToPoint(true, const_cast<void*>(sendbuff), count, datatype, peer, comm, stream);
}
BRAID_NCCL_ALIAS(ncclSend)

extern "C" ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                 ncclComm_t comm, cudaStream_t stream) {
  return pointToPoint(false, recvbuff, count, datatype, peer, comm, stream);
}
BRAID_NCCL_ALIAS(ncclRecv)
