// braid's one error type: a code plus a message that names rank, peer, operation and size.
// Public: the C++ API throws it (braid.hpp); the C API returns its codes (braid.h).
#pragma once

#include <stdexcept>
#include <string>

namespace braid {

/// What kind of failure an Error is. Stable: the C API returns these numbers.
enum class ErrorCode : int {
  kOk = 0,
  kInvalidUsage = 1,  ///< bad argument or call sequence; nothing was touched
  kSystemError = 2,   ///< an OS call failed (errno in the message)
  kCudaError = 3,
  kTimeout = 4,      ///< no progress for BRAID_TIMEOUT seconds
  kRemoteError = 5,  ///< a peer died, closed its link, or reported its own failure
  kAborted = 6,      ///< abort() was called on this communicator
  kInternal = 7,     ///< a bug in braid
  kMismatch = 8,     ///< ranks called different collectives / counts / types / ops / roots
};

/// Short lower-case name of a code ("timeout", "invalid usage", ...).
const char* errorCodeName(ErrorCode code);

/// Thrown by every layer; the C API maps it to a return code at its boundary.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace braid
