// The *_perf benches' flag parser (bench/perf/args.h: parseArgs) on an argv made from the input
// split at every NUL and space (so words may be empty). What parses must describe a sweep:
// minBytes <= maxBytes and a step that moves; sizes() is walked when it is short enough to list.
// braid::Error (kInvalidUsage naming the flag) is the refusal braid promises; anything else is a
// finding.
#include <string>
#include <vector>

#include "bench/perf/args.h"
#include "common/error.h"
#include "fuzz/fixture.h"

namespace bench = braid::bench;
using braid::fuzz::broken;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> argv(1);
  for (size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\0' || c == ' ') {
      argv.emplace_back();
    } else {
      argv.back() += c;
    }
  }
  try {
    const bench::BenchArgs args = bench::parseArgs(argv);
    if (args.minBytes > args.maxBytes) broken("minBytes > maxBytes");
    if (args.stepFactor <= 1 && args.stepBytes == 0) broken("a sweep that does not move");
    // A factor sweep has at most 64 sizes; a step sweep is listed when it is short.
    const bool shortSweep =
        args.stepFactor > 1 || (args.maxBytes - args.minBytes) / args.stepBytes < 4096;
    if (shortSweep) {
      const std::vector<uint64_t> sizes = args.sizes();
      if (sizes.empty() || sizes.front() != args.minBytes || sizes.back() > args.maxBytes) {
        broken("sizes() outside [minBytes, maxBytes]");
      }
    }
    (void)bench::usage("fuzz");
  } catch (const braid::Error&) {
  }
  return 0;
}
