// Making and ending communicators: ncclGetVersion, ncclGetUniqueId, ncclCommInitRank(Config),
// ncclCommInitAll, ncclCommFinalize, ncclCommDestroy, ncclCommAbort, and the queries.
#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

#include "comm.h"
#include "errors.h"
#include "export.h"
#include "group.h"
#include "init.h"
#include "init_log.h"
#include "memory.h"
#include "settings.h"

using namespace braid::nccl;
using braid::Communicator;

static_assert(sizeof(braid::UniqueId::bytes) == NCCL_UNIQUE_ID_BYTES);

namespace braid::nccl {

ncclResult_t startInit(ncclComm* comm, std::function<Communicator()> make, const char* call) {
  if (inGroup()) {
    comm->defer(std::move(make));
    deferInit(CommRef(comm, call));
    return ncclSuccess;
  }
  if (!comm->settings.blocking) {
    comm->initializeInBackground(std::move(make));
    return ncclInProgress;
  }
  try {
    comm->initialize(make);
  } catch (...) {
    delete comm;
    throw;
  }
  return ncclSuccess;
}

}  // namespace braid::nccl

namespace {

braid::UniqueId braidIdOf(const ncclUniqueId& id) {
  braid::UniqueId out;
  std::memcpy(out.bytes.data(), id.internal, NCCL_UNIQUE_ID_BYTES);
  return out;
}

/// Makes *out (blocking, deferred to the group's end, or in the background as the settings
/// say); returns ncclInProgress for a background creation.
ncclResult_t initRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                      const ncclConfig_t* config, const char* call) {
  ncclResult_t started = ncclSuccess;
  const ncclResult_t result = guard([&] {
    if (out == nullptr) argumentError(fmt::format("{}: comm is NULL", call));
    *out = nullptr;
    if (nranks < 1 || rank < 0 || rank >= nranks) {
      argumentError(fmt::format("{}: rank {} of {} ranks is out of range", call, rank, nranks));
    }
    CommSettings settings = settingsFrom(config, call);
    settings.rank = rank;
    settings.size = nranks;
    settings.device = currentDevice();
    const braid::UniqueId braidId = braidIdOf(id);
    auto make = [braidId, settings, call] {
      Communicator comm =
          Communicator::fromUniqueId(braidId, settings.rank, settings.size, settings.options);
      logInit(settings, call);
      return comm;
    };
    auto* comm = new ncclComm(settings);
    started = startInit(comm, make, call);
    *out = comm;
  });
  return result == ncclSuccess ? started : result;
}

}  // namespace

extern "C" ncclResult_t ncclGetVersion(int* version) {
  return guard([&] {
    if (version == nullptr) argumentError("ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
  });
}
BRAID_NCCL_ALIAS(ncclGetVersion)

extern "C" ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  return guard([&] {
    if (uniqueId == nullptr) argumentError("ncclGetUniqueId: uniqueId is NULL");
    const braid::UniqueId id = Communicator::uniqueId();
    std::memcpy(uniqueId->internal, id.bytes.data(), NCCL_UNIQUE_ID_BYTES);
  });
}
BRAID_NCCL_ALIAS(ncclGetUniqueId)

extern "C" ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                               int rank, ncclConfig_t* config) {
  return initRank(comm, nranks, commId, rank, config, "ncclCommInitRankConfig");
}
BRAID_NCCL_ALIAS(ncclCommInitRankConfig)

extern "C" ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                         int rank) {
  return initRank(comm, nranks, commId, rank, nullptr, "ncclCommInitRank");
}
BRAID_NCCL_ALIAS(ncclCommInitRank)

extern "C" ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return guard([&] {
    if (comms == nullptr) argumentError("ncclCommInitAll: comm is NULL");
    if (ndev < 1) argumentError(fmt::format("ncclCommInitAll: ndev {} < 1", ndev));
    const braid::UniqueId id = Communicator::uniqueId();
    std::vector<ncclComm_t> made(static_cast<size_t>(ndev), nullptr);
    std::vector<std::exception_ptr> failed(static_cast<size_t>(ndev));
    std::vector<std::thread> threads;
    for (int r = 0; r < ndev; ++r) {
      CommSettings settings;
      settings.rank = r;
      settings.size = ndev;
      settings.device = devlist != nullptr ? devlist[r] : r;
      made[r] = new ncclComm(settings);
      threads.emplace_back([&, r, settings] {
        try {
          made[r]->initialize([&] {
            Communicator comm = Communicator::fromUniqueId(id, r, ndev, settings.options);
            logInit(settings, "ncclCommInitAll");
            return comm;
          });
        } catch (...) {
          failed[r] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < ndev; ++r) {
      if (!failed[r]) continue;
      for (ncclComm_t c : made) releaseHandle(c);
      std::rethrow_exception(failed[r]);
    }
    for (int r = 0; r < ndev; ++r) comms[r] = made[r];
  });
}
BRAID_NCCL_ALIAS(ncclCommInitAll)

extern "C" ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return guard([&] {
    CommRef ref(comm, "ncclCommFinalize");
    ref->host("ncclCommFinalize");  // a background init finishes first
    ref->finalize();
  });
}
BRAID_NCCL_ALIAS(ncclCommFinalize)

extern "C" ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;  // as NCCL
  if (inGroup()) {
    deferDestroy(comm);
  } else {
    releaseHandle(comm);
  }
  setLastError("");
  return ncclSuccess;
}
BRAID_NCCL_ALIAS(ncclCommDestroy)

// At once, even inside a group (PyTorch aborts inside one): the group's queued ops of this
// communicator are dropped.
extern "C" ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  const ncclResult_t result = guard([&] {
    comm->abort();
    forgetOps(comm);
  });
  releaseHandle(comm);
  return result;
}
BRAID_NCCL_ALIAS(ncclCommAbort)

extern "C" ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  std::string message;
  ncclResult_t found = ncclSuccess;
  const ncclResult_t result = guard([&] {
    CommRef ref(comm, "ncclCommGetAsyncError");
    if (asyncError == nullptr) argumentError("ncclCommGetAsyncError: asyncError is NULL");
    found = ref->asyncError(&message);
    *asyncError = found;
  });
  // The call succeeded; ncclGetLastError explains the error it found.
  if (result == ncclSuccess && found != ncclSuccess && found != ncclInProgress)
    setLastError(message);
  return result;
}
BRAID_NCCL_ALIAS(ncclCommGetAsyncError)

namespace {

/// ncclCommCount, ncclCommCuDevice, ncclCommUserRank: one of the communicator's settings.
ncclResult_t query(ncclComm_t comm, int* out, const char* call, int CommSettings::*field) {
  return guard([&] {
    CommRef ref(comm, call);
    if (out == nullptr) argumentError(fmt::format("{}: the output pointer is NULL", call));
    *out = ref->settings.*field;
  });
}

}  // namespace

extern "C" ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return query(comm, count, "ncclCommCount", &CommSettings::size);
}
BRAID_NCCL_ALIAS(ncclCommCount)

extern "C" ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return query(comm, device, "ncclCommCuDevice", &CommSettings::device);
}
BRAID_NCCL_ALIAS(ncclCommCuDevice)

extern "C" ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return query(comm, rank, "ncclCommUserRank", &CommSettings::rank);
}
BRAID_NCCL_ALIAS(ncclCommUserRank)

// braid needs no registration (its device path stages through its own channels): accepted.
extern "C" ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size,
                                         void** handle) {
  return guard([&] {
    CommRef ref(comm, "ncclCommRegister");
    if (handle == nullptr) argumentError("ncclCommRegister: handle is NULL");
    *handle = buff;
  });
}
BRAID_NCCL_ALIAS(ncclCommRegister)

extern "C" ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return guard([&] { CommRef ref(comm, "ncclCommDeregister"); });
}
BRAID_NCCL_ALIAS(ncclCommDeregister)
