// Ranks as threads, the test kit's one thread harness: runs fn(rank) on n threads and collects
// what each threw. Communicator tests build on it (tests/kit/communicators.h creates a communicator
// per thread); transport tests run endpoints on it directly.
#pragma once

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "braid/error.hpp"

namespace braid::testing {

/// Runs fn(rank) for rank 0..n-1, each on its own thread, and joins them; returns each rank's
/// exception (null when it returned normally).
inline std::vector<std::exception_ptr> runThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

/// The message of a rank's exception, "" when none.
inline std::string errorText(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
  }
  return "unknown exception";
}

/// Every rank's message ("" for the ranks that returned normally).
inline std::vector<std::string> errorTexts(const std::vector<std::exception_ptr>& errors) {
  std::vector<std::string> out;
  out.reserve(errors.size());
  for (const auto& e : errors) out.push_back(errorText(e));
  return out;
}

/// The braid::Error code of a rank's exception: kOk when none, kInternal for a foreign one.
inline ErrorCode errorCode(const std::exception_ptr& e) {
  if (!e) return ErrorCode::kOk;
  try {
    std::rethrow_exception(e);
  } catch (const Error& ex) {
    return ex.code();
  } catch (...) {
  }
  return ErrorCode::kInternal;
}

}  // namespace braid::testing
