// One collective on host buffers, checked element by element against the kit's reference, and
// a list of such cases run on ranks as threads. Used by the collective matrix tests (comm/) and
// by the fault tests' rank processes (faults/).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "tests/kit/communicators.h"
#include "tests/kit/reference.h"

namespace braid::testing {

struct CollectiveCase {
  Collective coll;
  DataType type;
  RedOp op;
  size_t count;  ///< per the API: recvCount for reduceScatter, sendCount for allGather
  bool inPlace;
  int root;  ///< broadcast, reduce, gather and scatter; ignored by the others
  std::string name() const {
    return fmt::format("{} {} {} count={} {} root={}", collectiveName(coll), dataTypeName(type),
                       reduces(coll) ? redOpName(op) : "-", count,
                       inPlace ? "in-place" : "out-of-place", root);
  }
};

/// The blocking call of `coll` (one of the scheduled collectives) on `comm`.
inline void callCollective(Communicator& comm, Collective coll, const void* send, void* recv,
                           size_t count, DataType t, RedOp op, int root) {
  switch (coll) {
    case Collective::kAllReduce:
      return comm.allReduce(send, recv, count, t, op);
    case Collective::kReduceScatter:
      return comm.reduceScatter(send, recv, count, t, op);
    case Collective::kAllGather:
      return comm.allGather(send, recv, count, t);
    case Collective::kBroadcast:
      return comm.broadcast(send, recv, count, t, root);
    case Collective::kReduce:
      return comm.reduce(send, recv, count, t, op, root);
    case Collective::kAllToAll:
      return comm.allToAll(send, recv, count, t);
    case Collective::kGather:
      return comm.gather(send, recv, count, t, root);
    case Collective::kScatter:
      return comm.scatter(send, recv, count, t, root);
    default:
      ADD_FAILURE() << "callCollective: " << collectiveName(coll) << " is not a scheduled one";
  }
}

/// Runs one case on rank r of n through `call(in, out, send, recv)`, which runs c.coll with c's
/// count, type, op and root on whatever API is under test, reading `send` and writing `recv`:
/// both point into the host buffers `in` and `out` (an API on device memory copies both buffers
/// there, maps the two pointers, and copies both back). In place, the data starts where the API
/// says the result goes (reduceScatter and scatter: recv = send + rank's block; allGather and
/// gather: send = recv + rank's block; the others, allToAll too: recv = send). Returns "" or
/// what was wrong: rank, case, the first bad element, its bytes and the reference's.
inline std::string runCaseOn(
    int r, int n, const CollectiveCase& c,
    const std::function<void(std::vector<char>& in, std::vector<char>& out, const void* send,
                             void* recv)>& call) {
  const size_t elem = dataTypeSize(c.type);
  const size_t outCount = outputCount(c.coll, c.count, n);
  std::vector<char> in = rankInput(c.coll, c.type, c.op, c.count, n, r);
  in.resize(in.size() + 1);  // never empty: data() of a count-0 buffer is still a pointer
  std::vector<char> out(outCount * elem + 1, char(0xA5));
  const std::vector<char> want = expectedOutput(c.coll, c.type, c.op, c.count, n, r, c.root);
  const void* send = in.data();
  void* recv = out.data();
  if (c.inPlace) {
    const size_t block = size_t(r) * c.count * elem;
    if (c.coll == Collective::kReduceScatter || c.coll == Collective::kScatter) {
      recv = in.data() + block;
    } else if (c.coll == Collective::kAllGather || c.coll == Collective::kGather) {
      std::memcpy(out.data() + block, in.data(), c.count * elem);
      send = out.data() + block;
    } else {
      recv = in.data();
    }
  }
  call(in, out, send, recv);
  if (rootOnlyResult(c.coll) && r != c.root) return "";
  const long bad = firstMismatch(recv, want.data(), outCount, elem);
  if (bad < 0) return "";
  uint64_t got = 0, exp = 0;
  std::memcpy(&got, static_cast<char*>(recv) + size_t(bad) * elem, elem);
  std::memcpy(&exp, want.data() + size_t(bad) * elem, elem);
  return fmt::format("rank {}: {}: element {} is 0x{:x}, want 0x{:x}", r, c.name(), bad, got, exp);
}

/// runCaseOn for an API on host buffers: `call(send, recv)`.
inline std::string runCaseWith(int r, int n, const CollectiveCase& c,
                               const std::function<void(const void*, void*)>& call) {
  return runCaseOn(r, n, c, [&](std::vector<char>&, std::vector<char>&, const void* send,
                                void* recv) { call(send, recv); });
}

/// runCaseWith on a braid Communicator.
inline std::string runCase(Communicator& comm, const CollectiveCase& c) {
  return runCaseWith(comm.rank(), comm.size(), c, [&](const void* send, void* recv) {
    callCollective(comm, c.coll, send, recv, c.count, c.type, c.op, c.root);
  });
}

/// Runs `cases` on n ranks as threads (the same order on every rank; rank r with optionsOf(r))
/// and reports every rank's error and the first wrong results as test failures.
inline void runCasesOnThreads(int n, const std::function<Options(int)>& optionsOf,
                              const std::vector<CollectiveCase>& cases) {
  std::mutex mutex;
  std::vector<std::string> wrong;
  auto errors = runRanksEach(n, optionsOf, [&](Communicator& comm) {
    for (const CollectiveCase& c : cases) {
      std::string problem = runCase(comm, c);
      if (!problem.empty()) {
        std::lock_guard<std::mutex> lock(mutex);
        wrong.push_back(problem);
      }
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errorText(errors[r]), "") << "rank " << r;
  for (size_t i = 0; i < wrong.size() && i < 10; ++i) ADD_FAILURE() << wrong[i];
  EXPECT_EQ(wrong.size(), 0u);
}

}  // namespace braid::testing
