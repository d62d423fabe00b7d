#include "common/error.h"

#include <cstring>

namespace braid {

const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kInvalidUsage:
      return "invalid usage";
    case ErrorCode::kSystemError:
      return "system error";
    case ErrorCode::kCudaError:
      return "cuda error";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kRemoteError:
      return "remote error";
    case ErrorCode::kAborted:
      return "aborted";
    case ErrorCode::kInternal:
      return "internal error";
    case ErrorCode::kMismatch:
      return "collective mismatch";
  }
  return "unknown error";
}

void failErrno(const std::string& what, int errnum) {
  char buf[256];
  const char* text = strerror_r(errnum, buf, sizeof buf);
  throw Error(ErrorCode::kSystemError, fmt::format("{}: {} (errno {})", what, text, errnum));
}

}  // namespace braid
