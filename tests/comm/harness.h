// Runs N ranks as threads of this process over the real transports (shm by default), each with
// its own Communicator, and collects what each rank threw.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.hpp"
#include "comm/bootstrap/memory_store.h"
#include "comm/internal.h"

namespace braid::testing {

/// Creates `n` communicators (one per thread) and runs fn(comm) on each; returns each rank's
/// exception (null when it returned normally).
inline std::vector<std::exception_ptr> runRanks(int n, const Options& options,
                                                const std::function<void(Communicator&)>& fn) {
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        Communicator comm = CommFactory::fromStore(store, r, n, options);
        fn(comm);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

/// The same with options per rank (e.g. Options::hostName to pose as several hosts).
inline std::vector<std::exception_ptr> runRanksEach(
    int n, const std::function<Options(int rank)>& optionsOf,
    const std::function<void(Communicator&)>& fn) {
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        Communicator comm = CommFactory::fromStore(store, r, n, optionsOf(r));
        fn(comm);
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
  }
  return "unknown exception";
}

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
