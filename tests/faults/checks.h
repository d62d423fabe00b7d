// Child-side helpers: expect an error with a given code, message parts and time bound, reported
// to the parent through ChildIo. (Checked collective cases: tests/kit/host_case.h.)
#pragma once

#include <fmt/format.h>

#include <cstring>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "tests/kit/host_case.h"
#include "tests/kit/processes.h"

namespace braid::faults {

// The kit's rank processes (Job, ChildIo, ...) and reference, unqualified in the fault tests.
using namespace braid::testing;

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
