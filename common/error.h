// Raising braid::Error from inside braid: fail() with a formatted message, failErrno(), and
// BRAID_ENFORCE. The type itself is public (braid/error.hpp).
#pragma once

#include <fmt/format.h>

#include <string>

#include "braid/error.hpp"

namespace braid {

/// Throws Error(code, fmt::format(...)).
template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

/// Throws kSystemError with `what` and strerror(errnum).
[[noreturn]] void failErrno(const std::string& what, int errnum);

}  // namespace braid

/// Checks an invariant; on failure throws Error(code, message) where message says what held.
#define BRAID_ENFORCE(cond, code, ...)               \
  do {                                               \
    if (!(cond)) ::braid::fail((code), __VA_ARGS__); \
  } while (0)
