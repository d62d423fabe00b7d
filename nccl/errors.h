// Errors at the NCCL boundary: braid::Error becomes an ncclResult_t here, its message the
// thread's last error (ncclGetLastError); a call braid does not implement says so, loudly.
#pragma once

#include <string>

#include "braid/error.hpp"
#include "common/error.h"
#include "nccl.h"

namespace braid::nccl {

/// NCCL's result for a braid error code (a timeout is a peer's failure to progress: remote).
ncclResult_t resultOf(ErrorCode code);

/// The thread's last error message ("" after a success).
void setLastError(const std::string& message);
const char* lastError();

/// Runs body(); returns ncclSuccess, or the mapped code of what it threw (message kept as the
/// last error). Arguments checked by nccl/ itself throw kInvalidUsage via argumentError()
/// and come back as ncclInvalidArgument.
template <typename F>
ncclResult_t guard(F&& body);

/// Throws the error an argument check raises (ncclInvalidArgument at the boundary).
[[noreturn]] void argumentError(const std::string& message);

/// For a call braid does not implement: warns once per call name, sets the last error, and
/// returns ncclInvalidUsage.
ncclResult_t notImplemented(const char* call);

// ---- guard's definition ----
/// An argument error: thrown by argumentError, mapped to ncclInvalidArgument.
class ArgumentError : public Error {
 public:
  explicit ArgumentError(const std::string& message) : Error(ErrorCode::kInvalidUsage, message) {}
};

template <typename F>
ncclResult_t guard(F&& body) {
  try {
    body();
    setLastError("");
    return ncclSuccess;
  } catch (const ArgumentError& e) {
    setLastError(e.what());
    return ncclInvalidArgument;
  } catch (const Error& e) {
    setLastError(e.what());
    return resultOf(e.code());
  } catch (const std::exception& e) {
    setLastError(std::string("braid internal error: ") + e.what());
    return ncclInternalError;
  }
}

}  // namespace braid::nccl
