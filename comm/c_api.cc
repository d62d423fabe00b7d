// The C API: exceptions become return codes here, at the boundary, with a per-thread message.
#include <cstring>
#include <memory>
#include <string>

#include "braid/braid.h"
#include "braid/braid.hpp"
#include "common/error.h"

struct braidComm {
  braid::Communicator comm;
};
struct braidRequest {
  braid::Request request;
};

namespace {

thread_local std::string tLastError;

template <typename F>
braidResult_t guard(F&& body) {
  try {
    body();
    tLastError.clear();
    return braidSuccess;
  } catch (const braid::Error& e) {
    tLastError = e.what();
    return static_cast<braidResult_t>(e.code());
  } catch (const std::exception& e) {
    tLastError = std::string("internal error: ") + e.what();
    return braidInternalError;
  }
}

braid::DataType dt(braidDataType_t t) { return static_cast<braid::DataType>(t); }
braid::RedOp ro(braidRedOp_t o) { return static_cast<braid::RedOp>(o); }

braid::Communicator& C(braidComm_t comm) {
  BRAID_ENFORCE(comm != nullptr, braid::ErrorCode::kInvalidUsage, "communicator is NULL");
  return comm->comm;
}

}  // namespace

extern "C" {

const char* braidGetLastError(void) { return tLastError.c_str(); }

const char* braidGetErrorString(braidResult_t result) {
  if (result == braidInProgress) return "in progress";
  return braid::errorCodeName(static_cast<braid::ErrorCode>(result));
}

braidResult_t braidCommInitFromEnv(braidComm_t* comm) {
  return guard([&] {
    BRAID_ENFORCE(comm != nullptr, braid::ErrorCode::kInvalidUsage, "comm pointer is NULL");
    *comm = new braidComm{braid::Communicator::fromEnvironment()};
  });
}

braidResult_t braidGetUniqueId(braidUniqueId* id) {
  return guard([&] {
    BRAID_ENFORCE(id != nullptr, braid::ErrorCode::kInvalidUsage, "id pointer is NULL");
    braid::UniqueId made = braid::Communicator::uniqueId();
    static_assert(sizeof(id->internal) == sizeof(made.bytes));
    std::memcpy(id->internal, made.bytes.data(), sizeof id->internal);
  });
}

braidResult_t braidCommInitRank(braidComm_t* comm, int nranks, braidUniqueId id, int rank) {
  return guard([&] {
    BRAID_ENFORCE(comm != nullptr, braid::ErrorCode::kInvalidUsage, "comm pointer is NULL");
    braid::UniqueId uid;
    std::memcpy(uid.bytes.data(), id.internal, sizeof id.internal);
    *comm = new braidComm{braid::Communicator::fromUniqueId(uid, rank, nranks)};
  });
}

braidResult_t braidCommDestroy(braidComm_t comm) {
  return guard([&] { delete comm; });
}

braidResult_t braidCommAbort(braidComm_t comm) {
  return guard([&] {
    if (comm == nullptr) return;
    comm->comm.abort();
    delete comm;
  });
}

braidResult_t braidCommRank(braidComm_t comm, int* rank) {
  return guard([&] { *rank = C(comm).rank(); });
}
braidResult_t braidCommSize(braidComm_t comm, int* size) {
  return guard([&] { *size = C(comm).size(); });
}

braidResult_t braidAllReduce(const void* s, void* r, size_t n, braidDataType_t t, braidRedOp_t o,
                             braidComm_t comm) {
  return guard([&] { C(comm).allReduce(s, r, n, dt(t), ro(o)); });
}
braidResult_t braidReduceScatter(const void* s, void* r, size_t n, braidDataType_t t,
                                 braidRedOp_t o, braidComm_t comm) {
  return guard([&] { C(comm).reduceScatter(s, r, n, dt(t), ro(o)); });
}
braidResult_t braidAllGather(const void* s, void* r, size_t n, braidDataType_t t,
                             braidComm_t comm) {
  return guard([&] { C(comm).allGather(s, r, n, dt(t)); });
}
braidResult_t braidBroadcast(const void* s, void* r, size_t n, braidDataType_t t, int root,
                             braidComm_t comm) {
  return guard([&] { C(comm).broadcast(s, r, n, dt(t), root); });
}
braidResult_t braidReduce(const void* s, void* r, size_t n, braidDataType_t t, braidRedOp_t o,
                          int root, braidComm_t comm) {
  return guard([&] { C(comm).reduce(s, r, n, dt(t), ro(o), root); });
}
braidResult_t braidSend(const void* b, size_t n, braidDataType_t t, int peer, braidComm_t comm) {
  return guard([&] { C(comm).send(b, n, dt(t), peer); });
}
braidResult_t braidRecv(void* b, size_t n, braidDataType_t t, int peer, braidComm_t comm) {
  return guard([&] { C(comm).recv(b, n, dt(t), peer); });
}
braidResult_t braidBarrier(braidComm_t comm) {
  return guard([&] { C(comm).barrier(); });
}

braidResult_t braidAllReduceAsync(const void* s, void* r, size_t n, braidDataType_t t,
                                  braidRedOp_t o, braidComm_t comm, braidRequest_t* request) {
  return guard([&] {
    BRAID_ENFORCE(request != nullptr, braid::ErrorCode::kInvalidUsage, "request pointer is NULL");
    *request = new braidRequest{C(comm).allReduceAsync(s, r, n, dt(t), ro(o))};
  });
}
braidResult_t braidBroadcastAsync(const void* s, void* r, size_t n, braidDataType_t t, int root,
                                  braidComm_t comm, braidRequest_t* request) {
  return guard([&] {
    BRAID_ENFORCE(request != nullptr, braid::ErrorCode::kInvalidUsage, "request pointer is NULL");
    *request = new braidRequest{C(comm).broadcastAsync(s, r, n, dt(t), root)};
  });
}

braidResult_t braidWait(braidRequest_t request, double timeoutSeconds) {
  return guard([&] {
    BRAID_ENFORCE(request != nullptr, braid::ErrorCode::kInvalidUsage, "request is NULL");
    request->request.wait(timeoutSeconds < 0 ? braid::Deadline::never()
                                             : braid::Deadline::after(timeoutSeconds));
  });
}

braidResult_t braidTest(braidRequest_t request) {
  bool finished = false;
  braidResult_t result = guard([&] {
    BRAID_ENFORCE(request != nullptr, braid::ErrorCode::kInvalidUsage, "request is NULL");
    finished = request->request.test();
    if (finished) request->request.wait(braid::Deadline::after(0));
  });
  if (result == braidSuccess && !finished) return braidInProgress;
  return result;
}

braidResult_t braidRequestFree(braidRequest_t request) {
  return guard([&] { delete request; });
}

}  // extern "C"
