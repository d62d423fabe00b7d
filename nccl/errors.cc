#include "errors.h"

#include <mutex>
#include <set>

#include "common/log.h"
#include "export.h"

namespace braid::nccl {
namespace {
thread_local std::string tLastError;
}  // namespace

ncclResult_t resultOf(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return ncclSuccess;
    case ErrorCode::kInvalidUsage:
    case ErrorCode::kMismatch:  // ranks called different collectives: the program's error
      return ncclInvalidUsage;
    case ErrorCode::kSystemError:
    case ErrorCode::kAborted:
      return ncclSystemError;
    case ErrorCode::kCudaError:
      return ncclUnhandledCudaError;
    case ErrorCode::kTimeout:
    case ErrorCode::kRemoteError:
      return ncclRemoteError;
    case ErrorCode::kInternal:
      return ncclInternalError;
  }
  return ncclInternalError;
}

void setLastError(const std::string& message) { tLastError = message; }
const char* lastError() { return tLastError.c_str(); }

void argumentError(const std::string& message) { throw ArgumentError(message); }

ncclResult_t notImplemented(const char* call) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  const std::string message = std::string(call) +
                              ": braid does not implement this NCCL call (braid's libnccl.so.2 "
                              "implements the NCCL 2.21 API; see nccl/README.md)";
  bool first;
  {
    std::lock_guard<std::mutex> lock(mutex);
    first = warned.insert(call).second;
  }
  if (first) logAt(LogLevel::kWarn, LogSubsys::kColl, "{}: returning ncclInvalidUsage", message);
  setLastError(message);
  return ncclInvalidUsage;
}

}  // namespace braid::nccl

extern "C" const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with BRAID_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with BRAID_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the braid developers";
    case ncclInvalidArgument:
      return "invalid argument (run with BRAID_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with BRAID_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}
BRAID_NCCL_ALIAS(ncclGetErrorString)

extern "C" const char* ncclGetLastError(ncclComm_t) { return braid::nccl::lastError(); }
BRAID_NCCL_ALIAS(ncclGetLastError)
