// The C API: exceptions become return codes here, at the boundary, with a per-thread message.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "braid/braid.h"
#include "braid/braid.hpp"
#include "common/error.h"

// A handle holds one reference and every call in progress one more; braidCommAbort and
// braidCommDestroy drop the handle's, and whoever drops the last frees it. So abort from another
// thread (the use braid.h documents) never frees the communicator under a call still running in
// it: that call sees the abort, returns braidAborted, and frees it on the way out.
struct braidComm {
  explicit braidComm(braid::Communicator c) : comm(std::move(c)) {}
  braid::Communicator comm;
  std::atomic<int> refs{1};
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

void release(braidComm_t comm) {
  if (comm->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete comm;
}

// Pins a handle for the length of one call (see braidComm).
class Pinned {
 public:
  Pinned(braidComm_t comm, const char* fn) : comm_(comm) {
    BRAID_ENFORCE(comm != nullptr, braid::ErrorCode::kInvalidUsage, "{}: communicator is NULL",
                  fn);
    comm_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  ~Pinned() { release(comm_); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  braid::Communicator* operator->() const { return &comm_->comm; }

  // C enums are ints: the full value is checked before it becomes an 8-bit DataType or RedOp,
  // so 263 is refused instead of running as float32 (263 mod 256).
  braid::DataType type(braidDataType_t t, const char* fn) const {
    BRAID_ENFORCE(int(t) >= 0 && int(t) < braid::kNumDataTypes, braid::ErrorCode::kInvalidUsage,
                  "rank {}: {}: unknown data type {} (valid: 0..{})", comm_->comm.rank(), fn,
                  int(t), braid::kNumDataTypes - 1);
    return static_cast<braid::DataType>(t);
  }
  braid::RedOp op(braidRedOp_t o, const char* fn) const {
    BRAID_ENFORCE(int(o) >= 0 && int(o) < braid::kNumRedOps, braid::ErrorCode::kInvalidUsage,
                  "rank {}: {}: unknown reduction op {} (valid: 0..{})", comm_->comm.rank(), fn,
                  int(o), braid::kNumRedOps - 1);
    return static_cast<braid::RedOp>(o);
  }

 private:
  braidComm_t comm_;
};

template <typename T>
void enforceOut(T* out, const char* fn) {
  BRAID_ENFORCE(out != nullptr, braid::ErrorCode::kInvalidUsage, "{}: output pointer is NULL",
                fn);
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
    *comm = new braidComm(braid::Communicator::fromEnvironment());
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
    *comm = new braidComm(braid::Communicator::fromUniqueId(uid, rank, nranks));
  });
}

braidResult_t braidCommDestroy(braidComm_t comm) {
  return guard([&] {
    if (comm != nullptr) release(comm);
  });
}

braidResult_t braidCommAbort(braidComm_t comm) {
  return guard([&] {
    if (comm == nullptr) return;
    comm->comm.abort();
    release(comm);
  });
}

braidResult_t braidCommRank(braidComm_t comm, int* rank) {
  return guard([&] {
    enforceOut(rank, "braidCommRank");
    *rank = Pinned(comm, "braidCommRank")->rank();
  });
}
braidResult_t braidCommSize(braidComm_t comm, int* size) {
  return guard([&] {
    enforceOut(size, "braidCommSize");
    *size = Pinned(comm, "braidCommSize")->size();
  });
}

braidResult_t braidCommDump(braidComm_t comm, char* out, size_t size) {
  return guard([&] {
    const std::string report = Pinned(comm, "braidCommDump")->statusReport();
    if (out == nullptr) {
      std::fputs(report.c_str(), stderr);
      return;
    }
    BRAID_ENFORCE(size > 0, braid::ErrorCode::kInvalidUsage,
                  "braidCommDump: an output buffer of 0 bytes");
    const size_t n = std::min(report.size(), size - 1);
    std::memcpy(out, report.data(), n);
    out[n] = '\0';
  });
}

braidResult_t braidAllReduce(const void* s, void* r, size_t n, braidDataType_t t, braidRedOp_t o,
                             braidComm_t comm) {
  return guard([&] {
    const char* fn = "braidAllReduce";
    Pinned c(comm, fn);
    c->allReduce(s, r, n, c.type(t, fn), c.op(o, fn));
  });
}
braidResult_t braidReduceScatter(const void* s, void* r, size_t n, braidDataType_t t,
                                 braidRedOp_t o, braidComm_t comm) {
  return guard([&] {
    const char* fn = "braidReduceScatter";
    Pinned c(comm, fn);
    c->reduceScatter(s, r, n, c.type(t, fn), c.op(o, fn));
  });
}
braidResult_t braidAllGather(const void* s, void* r, size_t n, braidDataType_t t,
                             braidComm_t comm) {
  return guard([&] {
    const char* fn = "braidAllGather";
    Pinned c(comm, fn);
    c->allGather(s, r, n, c.type(t, fn));
  });
}
braidResult_t braidBroadcast(const void* s, void* r, size_t n, braidDataType_t t, int root,
                             braidComm_t comm) {
  return guard([&] {
    const char* fn = "braidBroadcast";
    Pinned c(comm, fn);
    c->broadcast(s, r, n, c.type(t, fn), root);
  });
}
braidResult_t braidAllToAll(const void* s, void* r, size_t n, braidDataType_t t, braidComm_t comm) {
  return guard([&] {
    const char* fn = "braidAllToAll";
    Pinned c(comm, fn);
    c->allToAll(s, r, n, c.type(t, fn));
  });
}
braidResult_t braidAllToAllv(const void* s, const size_t* sc, const size_t* sd, void* r,
                             const size_t* rc, const size_t* rd, braidDataType_t t,
                             braidComm_t comm) {
  return guard([&] {
    const char* fn = "braidAllToAllv";
    Pinned c(comm, fn);
    c->allToAllv(s, sc, sd, r, rc, rd, c.type(t, fn));
  });
}
braidResult_t braidGather(const void* s, void* r, size_t n, braidDataType_t t, int root,
                          braidComm_t comm) {
  return guard([&] {
    const char* fn = "braidGather";
    Pinned c(comm, fn);
    c->gather(s, r, n, c.type(t, fn), root);
  });
}
braidResult_t braidScatter(const void* s, void* r, size_t n, braidDataType_t t, int root,
                           braidComm_t comm) {
  return guard([&] {
    const char* fn = "braidScatter";
    Pinned c(comm, fn);
    c->scatter(s, r, n, c.type(t, fn), root);
  });
}
braidResult_t braidReduce(const void* s, void* r, size_t n, braidDataType_t t, braidRedOp_t o,
                          int root, braidComm_t comm) {
  return guard([&] {
    const char* fn = "braidReduce";
    Pinned c(comm, fn);
    c->reduce(s, r, n, c.type(t, fn), c.op(o, fn), root);
  });
}
braidResult_t braidSend(const void* b, size_t n, braidDataType_t t, int peer, braidComm_t comm) {
  return guard([&] {
    const char* fn = "braidSend";
    Pinned c(comm, fn);
    c->send(b, n, c.type(t, fn), peer);
  });
}
braidResult_t braidRecv(void* b, size_t n, braidDataType_t t, int peer, braidComm_t comm) {
  return guard([&] {
    const char* fn = "braidRecv";
    Pinned c(comm, fn);
    c->recv(b, n, c.type(t, fn), peer);
  });
}
braidResult_t braidRecvAnySource(void* b, size_t n, braidDataType_t t, int tag, int* source,
                                 size_t* bytes, braidComm_t comm) {
  return guard([&] {
    const char* fn = "braidRecvAnySource";
    Pinned c(comm, fn);
    const braid::RecvResult got = c->recvAnySource(b, n, c.type(t, fn), tag);
    if (source != nullptr) *source = got.source;
    if (bytes != nullptr) *bytes = got.bytes;
  });
}
braidResult_t braidBarrier(braidComm_t comm) {
  return guard([&] { Pinned(comm, "braidBarrier")->barrier(); });
}

braidResult_t braidMemAlloc(void** ptr, size_t bytes) {
  return guard([&] {
    enforceOut(ptr, "braidMemAlloc");
    *ptr = braid::memAlloc(bytes);
  });
}

braidResult_t braidMemFree(void* ptr) {
  return guard([&] { braid::memFree(ptr); });
}

braidResult_t braidAllReduceAsync(const void* s, void* r, size_t n, braidDataType_t t,
                                  braidRedOp_t o, braidComm_t comm, braidRequest_t* request) {
  return guard([&] {
    const char* fn = "braidAllReduceAsync";
    enforceOut(request, fn);
    Pinned c(comm, fn);
    *request = new braidRequest{c->allReduceAsync(s, r, n, c.type(t, fn), c.op(o, fn))};
  });
}
braidResult_t braidBroadcastAsync(const void* s, void* r, size_t n, braidDataType_t t, int root,
                                  braidComm_t comm, braidRequest_t* request) {
  return guard([&] {
    const char* fn = "braidBroadcastAsync";
    enforceOut(request, fn);
    Pinned c(comm, fn);
    *request = new braidRequest{c->broadcastAsync(s, r, n, c.type(t, fn), root)};
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
