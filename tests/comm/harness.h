// Communicators on ranks as threads: N threads of this process (the test kit's runThreads), each
// with its own Communicator over the real transports (shm by default), and what each rank threw.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "braid/braid.hpp"
#include "comm/bootstrap/memory_store.h"
#include "comm/detail/internal.h"
#include "tests/kit/threads.h"

namespace braid::testing {

/// Creates n communicators (one per thread, rank r with optionsOf(r), e.g. Options::hostName to
/// pose as several hosts) and runs fn(comm) on each; returns each rank's exception.
inline std::vector<std::exception_ptr> runRanksEach(
    int n, const std::function<Options(int rank)>& optionsOf,
    const std::function<void(Communicator&)>& fn) {
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  return runThreads(n, [&](int r) {
    Communicator comm = CommFactory::fromStore(store, r, n, optionsOf(r));
    fn(comm);
  });
}

/// The same with one set of options for every rank.
inline std::vector<std::exception_ptr> runRanks(int n, const Options& options,
                                                const std::function<void(Communicator&)>& fn) {
  return runRanksEach(
      n, [&](int) { return options; }, fn);
}

}  // namespace braid::testing
