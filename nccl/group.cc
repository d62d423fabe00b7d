#include "group.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "errors.h"
#include "export.h"
#include "memory.h"

namespace braid::nccl {
namespace {

struct Group {
  int depth = 0;
  std::vector<Op> ops;
  std::vector<CommRef> inits;
  std::vector<ncclComm_t> destroys;
};
thread_local Group tGroup;

/// The error of a failed op, kept on its communicator and returned by the group.
class FirstError {
 public:
  void add(ncclComm& comm, const std::exception_ptr& error) {
    try {
      std::rethrow_exception(error);
    } catch (const ArgumentError& e) {
      keep(ncclInvalidArgument, e.what());
    } catch (const Error& e) {
      comm.recordFailure(resultOf(e.code()), e.what());
      keep(resultOf(e.code()), e.what());
    } catch (const std::exception& e) {
      comm.recordFailure(ncclInternalError, e.what());
      keep(ncclInternalError, e.what());
    }
  }
  /// Throws the first error kept, as guard() maps it back.
  void rethrow() const {
    if (result_ == ncclSuccess) return;
    if (result_ == ncclInvalidArgument) argumentError(message_);
    throw Error(codeOf(result_), message_);
  }

 private:
  void keep(ncclResult_t result, const std::string& message) {
    if (result_ != ncclSuccess) return;
    result_ = result;
    message_ = message;
  }
  static ErrorCode codeOf(ncclResult_t result) {
    switch (result) {
      case ncclUnhandledCudaError:
        return ErrorCode::kCudaError;
      case ncclSystemError:
        return ErrorCode::kSystemError;
      case ncclRemoteError:
        return ErrorCode::kRemoteError;
      case ncclInvalidUsage:
        return ErrorCode::kInvalidUsage;
      default:
        return ErrorCode::kInternal;
    }
  }
  ncclResult_t result_ = ncclSuccess;
  std::string message_;
};

/// Runs body(i) for i in [0, n) on threads of their own (collective creations of ranks that this
/// thread drives together) and keeps each failure.
void onThreads(size_t n, const std::function<void(size_t)>& body,
               const std::function<ncclComm&(size_t)>& commOf, FirstError& errors) {
  std::vector<std::exception_ptr> failed(n);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        body(i);
      } catch (...) {
        failed[i] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < n; ++i)
    if (failed[i]) errors.add(commOf(i), failed[i]);
}

void runNow(Op& op) {
  try {
    if (op.onDevice) {
      op.enqueueDevice(op.comm->device(op.call), op.stream);
    } else {
      op.postHost(op.comm->host(op.call)).wait();
    }
  } catch (const ArgumentError&) {
    throw;
  } catch (const Error& e) {
    op.comm->recordFailure(resultOf(e.code()), e.what());
    throw;
  }
}

/// The group's sends to and receives from their own rank, paired per communicator in posting
/// order, each pair one copy; a send without its receive (or sizes that differ) is an error.
void copySelfPairs(std::vector<Op>& ops, FirstError& errors) {
  std::vector<ncclComm*> comms;
  for (const Op& op : ops) {
    if (op.self && std::find(comms.begin(), comms.end(), op.comm.get()) == comms.end())
      comms.push_back(op.comm.get());
  }
  for (ncclComm* comm : comms) {
    std::vector<const Op*> sends, recvs;
    for (const Op& op : ops) {
      if (op.self && op.comm.get() == comm) (op.self->send ? sends : recvs).push_back(&op);
    }
    try {
      const int rank = comm->settings.rank;
      BRAID_ENFORCE(sends.size() == recvs.size(), ErrorCode::kInvalidUsage,
                    "rank {}: ncclGroupEnd: {} ncclSend(s) to this rank itself but {} "
                    "ncclRecv(s) from it (each needs its match in the same group)",
                    rank, sends.size(), recvs.size());
      for (size_t k = 0; k < sends.size(); ++k) {
        const Op::Self &from = *sends[k]->self, &to = *recvs[k]->self;
        BRAID_ENFORCE(from.bytes == to.bytes, ErrorCode::kInvalidUsage,
                      "rank {}: ncclGroupEnd: send #{} to this rank itself has {} bytes, its "
                      "receive {}",
                      rank, k, from.bytes, to.bytes);
        if (comm->aborted.load()) continue;
        if (recvs[k]->onDevice || sends[k]->onDevice) {
          copyOnStream(to.buf, from.buf, from.bytes, recvs[k]->stream.handle);
        } else if (from.bytes > 0 && to.buf != from.buf) {
          std::memcpy(to.buf, from.buf, from.bytes);
        }
      }
    } catch (...) {
      errors.add(*comm, std::current_exception());
    }
  }
}

/// The outermost group's end: inits, then device communicators, then ops, then destroys.
void endGroup(Group group) {
  FirstError errors;
  onThreads(
      group.inits.size(), [&](size_t i) { group.inits[i]->runDeferred(); },
      [&](size_t i) -> ncclComm& { return *group.inits[i].get(); }, errors);

  // Device communicators the group's ops need first, made together (collective per comm).
  std::vector<ncclComm*> needDevice;
  for (const Op& op : group.ops) {
    if (op.onDevice && !op.self && !op.comm->hasDevice() &&
        std::find(needDevice.begin(), needDevice.end(), op.comm.get()) == needDevice.end())
      needDevice.push_back(op.comm.get());
  }
  onThreads(
      needDevice.size(), [&](size_t i) { needDevice[i]->device("ncclGroupEnd"); },
      [&](size_t i) -> ncclComm& { return *needDevice[i]; }, errors);

  copySelfPairs(group.ops, errors);
  std::vector<std::pair<Request, ncclComm*>> posted;
  for (Op& op : group.ops) {
    if (op.comm->aborted.load() || op.self) continue;
    try {
      if (op.onDevice) {
        op.enqueueDevice(op.comm->device(op.call), op.stream);
      } else {
        posted.emplace_back(op.postHost(op.comm->host(op.call)), op.comm.get());
      }
    } catch (...) {
      errors.add(*op.comm.get(), std::current_exception());
    }
  }
  for (auto& [request, comm] : posted) {
    try {
      request.wait();
    } catch (...) {
      errors.add(*comm, std::current_exception());
    }
  }
  posted.clear();
  group.ops.clear();  // the ops' references go before the destroys drop the handles'
  for (ncclComm_t comm : group.destroys) releaseHandle(comm);
  errors.rethrow();
}

}  // namespace

bool inGroup() { return tGroup.depth > 0; }

void submit(Op op) {
  if (inGroup()) {
    tGroup.ops.push_back(std::move(op));
    return;
  }
  runNow(op);
}

void deferInit(CommRef comm) { tGroup.inits.push_back(std::move(comm)); }
void deferDestroy(ncclComm_t comm) { tGroup.destroys.push_back(comm); }

void forgetOps(ncclComm_t comm) {
  auto& ops = tGroup.ops;
  ops.erase(std::remove_if(ops.begin(), ops.end(), [&](const Op& op) { return op.comm.get() == comm; }),
            ops.end());
}

}  // namespace braid::nccl

using namespace braid::nccl;

extern "C" ncclResult_t ncclGroupStart() {
  ++tGroup.depth;
  braid::nccl::setLastError("");
  return ncclSuccess;
}
BRAID_NCCL_ALIAS(ncclGroupStart)

extern "C" ncclResult_t ncclGroupEnd() {
  return guard([] {
    BRAID_ENFORCE(tGroup.depth > 0, braid::ErrorCode::kInvalidUsage,
                  "ncclGroupEnd: no group was started on this thread (ncclGroupStart)");
    if (--tGroup.depth > 0) return;
    Group group = std::move(tGroup);
    tGroup = Group{};
    endGroup(std::move(group));
  });
}
BRAID_NCCL_ALIAS(ncclGroupEnd)
