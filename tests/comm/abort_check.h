// One check of abort() for ranks as threads: a thread of this rank aborts the communicator while
// `requests` (ops the peer never serves) wait, and each must end with kAborted, all within 2 s.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "braid/braid.hpp"

namespace braid::testing {

inline void expectAbortEnds(Communicator& comm, const std::vector<Request*>& requests) {
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    comm.abort();
  });
  const auto start = Clock::now();
  for (Request* request : requests) {
    try {
      request->wait(Deadline::after(10));
      ADD_FAILURE() << "an op finished although its peer never served it";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kAborted) << e.what();
    }
  }
  aborter.join();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.0);
}

}  // namespace braid::testing
