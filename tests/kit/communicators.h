// Communicators on ranks as threads: N threads of this process (the test kit's runThreads), each
// with its own Communicator over the real transports (shm by default), and what each rank threw.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "braid/store.hpp"
#include "tests/kit/threads.h"

namespace braid::testing {

/// Options with a transport forced ("" = by capability) and a timeout in seconds.
inline Options optionsFor(const std::string& transport, double timeout = 30) {
  Options options;
  options.transport = transport;
  options.timeoutSeconds = timeout;
  return options;
}

/// Creates n communicators (one per thread, rank r with Communicator::fromStore over storeOf(r)
/// and optionsOf(r)) and runs fn(comm) on each; returns each rank's exception.
inline std::vector<std::exception_ptr> runRanksOn(
    int n, const std::function<std::shared_ptr<Store>(int rank)>& storeOf,
    const std::function<Options(int rank)>& optionsOf,
    const std::function<void(Communicator&)>& fn) {
  return runThreads(n, [&](int r) {
    Communicator comm = Communicator::fromStore(storeOf(r), r, n, optionsOf(r));
    fn(comm);
  });
}

/// The same over one in-memory store (rank r with optionsOf(r), e.g. Options::hostName to pose
/// as several hosts).
inline std::vector<std::exception_ptr> runRanksEach(
    int n, const std::function<Options(int rank)>& optionsOf,
    const std::function<void(Communicator&)>& fn) {
  auto store = makeInMemoryStore();
  return runRanksOn(
      n, [&](int) { return store; }, optionsOf, fn);
}

/// The same with one set of options for every rank.
inline std::vector<std::exception_ptr> runRanks(int n, const Options& options,
                                                const std::function<void(Communicator&)>& fn) {
  return runRanksEach(
      n, [&](int) { return options; }, fn);
}

}  // namespace braid::testing
