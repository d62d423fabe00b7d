// Child-side helpers: run a collective case against the exact reference, and expect an error with
// a given code, message parts and time bound. Each reports to the parent through ChildIo.
#pragma once

#include <fmt/format.h>

#include <cstring>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "tests/comm/reference.h"
#include "tests/faults/proc.h"

namespace braid::faults {

inline bool reducesData(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce;
}

/// One collective call, in place or not, checked element by element on every rank that gets a
/// result. Returns "" or what was wrong (rank, case, first bad element, got and want bytes).
inline std::string runCase(Communicator& comm, Collective coll, DataType t, RedOp op, size_t count,
                           bool inPlace, int root) {
  using namespace braid::testing;
  const int n = comm.size(), r = comm.rank();
  const size_t elem = dataTypeSize(t);
  size_t inCount = count, outCount = count;
  if (coll == Collective::kReduceScatter) inCount = count * n;
  if (coll == Collective::kAllGather) outCount = count * n;
  const RedOp dataOp = reducesData(coll) ? op : RedOp::kSum;
  std::vector<char> in(inCount * elem), out(outCount * elem, char(0xA5)), want(outCount * elem);
  fillInput(t, dataOp, r, in.data(), inCount);
  switch (coll) {
    case Collective::kAllReduce:
    case Collective::kReduce:
      for (size_t i = 0; i < outCount; ++i) storeExpected(t, op, n, i, want.data(), i);
      break;
    case Collective::kReduceScatter:
      for (size_t i = 0; i < outCount; ++i)
        storeExpected(t, op, n, size_t(r) * count + i, want.data(), i);
      break;
    case Collective::kAllGather:
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i)
          store(t, want.data(), size_t(q) * count + i, inputValue(t, dataOp, q, i));
      break;
    case Collective::kBroadcast:
      for (size_t i = 0; i < outCount; ++i)
        store(t, want.data(), i, inputValue(t, dataOp, root, i));
      break;
    default:
      break;
  }
  const void* send = in.data();
  void* recv = out.data();
  if (inPlace) {
    switch (coll) {
      case Collective::kReduceScatter:
        recv = in.data() + size_t(r) * count * elem;
        break;
      case Collective::kAllGather:
        std::memcpy(out.data() + size_t(r) * count * elem, in.data(), count * elem);
        send = out.data() + size_t(r) * count * elem;
        break;
      default:
        recv = in.data();
        break;
    }
  }
  switch (coll) {
    case Collective::kAllReduce:
      comm.allReduce(send, recv, count, t, op);
      break;
    case Collective::kReduceScatter:
      comm.reduceScatter(send, recv, count, t, op);
      break;
    case Collective::kAllGather:
      comm.allGather(send, recv, count, t);
      break;
    case Collective::kBroadcast:
      comm.broadcast(send, recv, count, t, root);
      break;
    case Collective::kReduce:
      comm.reduce(send, recv, count, t, op, root);
      break;
    default:
      break;
  }
  if (coll == Collective::kReduce && r != root) return "";
  long bad = firstMismatch(recv, want.data(), outCount, elem);
  if (bad < 0) return "";
  uint64_t got = 0, exp = 0;
  std::memcpy(&got, static_cast<char*>(recv) + size_t(bad) * elem, elem);
  std::memcpy(&exp, want.data() + size_t(bad) * elem, elem);
  return fmt::format("rank {}: {} {} {} count={} {} root={}: element {} is 0x{:x}, want 0x{:x}", r,
                     collectiveName(coll), dataTypeName(t), redOpName(op), count,
                     inPlace ? "in-place" : "out-of-place", root, bad, got, exp);
}

/// Runs fn, which must throw braid::Error with code `want` whose message contains every one of
/// `needles`, within `maxSeconds`. Reports "<label>.code", ".msg", ".secs", ".t" (monotonic time
/// of the throw) and, on failure, "<label>.fail". Returns true when all held.
template <typename F>
bool expectError(ChildIo& io, const std::string& label, F&& fn, ErrorCode want,
                 const std::vector<std::string>& needles, double maxSeconds) {
  const double start = monoNow();
  std::string problem;
  try {
    fn();
    problem = "returned normally";
  } catch (const Error& e) {
    const double now = monoNow();
    io.say(label + ".code", errorCodeName(e.code()));
    io.say(label + ".msg", e.what());
    io.say(label + ".secs", fmt::format("{:.3f}", now - start));
    io.say(label + ".t", fmt::format("{:.6f}", now));
    if (e.code() != want)
      problem = fmt::format("code {} (want {})", errorCodeName(e.code()), errorCodeName(want));
    for (const std::string& needle : needles)
      if (std::string(e.what()).find(needle) == std::string::npos)
        problem += fmt::format(" message lacks '{}'", needle);
    if (now - start > maxSeconds)
      problem += fmt::format(" took {:.3f} s > {:.3f} s", now - start, maxSeconds);
  } catch (const std::exception& e) {
    problem = std::string("non-braid exception: ") + e.what();
  }
  if (!problem.empty()) io.say(label + ".fail", problem);
  return problem.empty();
}

}  // namespace braid::faults
