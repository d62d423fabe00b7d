#include "bench/perf/args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/format/names.h"

namespace braid::bench {
namespace {

BenchArgs parse(std::vector<std::string> words) { return parseArgs(words); }

/// The kInvalidUsage message parseArgs throws for `words` ("" when it does not throw).
std::string errorOf(std::vector<std::string> words) {
  try {
    parseArgs(words);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage) << e.what();
    return e.what();
  }
  return "";
}

TEST(PerfArgs, DefaultsAreNcclTests) {
  BenchArgs a = parse({});
  EXPECT_EQ(a.minBytes, 32u << 20);
  EXPECT_EQ(a.maxBytes, 32u << 20);
  EXPECT_EQ(a.iters, 20);
  EXPECT_EQ(a.warmupIters, 5);
  EXPECT_TRUE(a.check);
  EXPECT_FALSE(a.blocking);
  EXPECT_EQ(a.average, Average::kMean);
  ASSERT_EQ(a.types.size(), 1u);
  EXPECT_EQ(a.types[0], DataType::kFloat32);
  ASSERT_EQ(a.ops.size(), 1u);
  EXPECT_EQ(a.ops[0], RedOp::kSum);
  EXPECT_EQ(a.sizes(), std::vector<uint64_t>{32u << 20});
}

TEST(PerfArgs, ShortLongAndAttachedForms) {
  BenchArgs a = parse({"-b",      "8",    "-e1M",        "--stepfactor=8",
                       "--iters", "3",    "-w",          "0",
                       "-c",      "0",    "-z",          "1",
                       "-a",      "3",    "-J",          "out.json",
                       "--algo",  "ring", "--transport", "shm",
                       "-t",      "1",    "-g",          "1",
                       "-m",      "1",    "-p",          "0",
                       "-C",      "1",    "-G",          "0"});
  EXPECT_EQ(a.minBytes, 8u);
  EXPECT_EQ(a.maxBytes, 1u << 20);
  EXPECT_EQ(a.sizes(), (std::vector<uint64_t>{8, 64, 512, 4096, 32768, 262144}));
  EXPECT_EQ(a.iters, 3);
  EXPECT_EQ(a.warmupIters, 0);
  EXPECT_FALSE(a.check);
  EXPECT_TRUE(a.blocking);
  EXPECT_EQ(a.average, Average::kMax);
  EXPECT_EQ(a.outputFile, "out.json");
  EXPECT_EQ(a.algorithm, Algorithm::kRing);
  EXPECT_EQ(a.transport, "shm");
}

TEST(PerfArgs, AnyStepFactorNcclTestsAccepts) {
  // No upper bound: a two-point sweep, as `-b 8 -e 256M -f 33554432` is in nccl-tests.
  EXPECT_EQ(parse({"-b", "8", "-e", "256M", "-f", "33554432"}).sizes(),
            (std::vector<uint64_t>{8, 256u << 20}));
  // strtol base 0, and a factor so large the next size passes 2^64: the sweep just ends.
  EXPECT_EQ(parse({"-b", "8", "-e", "1G", "-f", "0x40000000"}).sizes(),
            (std::vector<uint64_t>{8}));
  EXPECT_EQ(parse({"-b", "1G", "-e", "2G", "-f", "9223372036854775807"}).sizes(),
            (std::vector<uint64_t>{1u << 30}));
  // 0 and 1 mean "step by -i".
  EXPECT_EQ(parse({"-b", "8", "-e", "24", "-i", "8", "-f", "0"}).sizes(),
            (std::vector<uint64_t>{8, 16, 24}));
  EXPECT_EQ(parse({"-b", "8", "-e", "24", "-i", "8", "-f", "1"}).sizes(),
            (std::vector<uint64_t>{8, 16, 24}));
}

TEST(PerfArgs, StepBytesAndSuffixes) {
  BenchArgs a = parse({"-b", "1K", "-e", "4k", "-i", "1K"});
  EXPECT_EQ(a.sizes(), (std::vector<uint64_t>{1024, 2048, 3072, 4096}));
  EXPECT_EQ(parse({"-e", "2G"}).maxBytes, 2ull << 30);
  // A factor wins over a step, as in nccl-tests.
  EXPECT_EQ(parse({"-b", "8", "-e", "32", "-i", "1", "-f", "2"}).sizes(),
            (std::vector<uint64_t>{8, 16, 32}));
}

TEST(PerfArgs, AllTypesOpsRoots) {
  BenchArgs a = parse({"-d", "all", "-o", "all", "-r", "all"});
  EXPECT_EQ(a.types.size(), 10u);
  EXPECT_EQ(a.ops.size(), 5u);
  EXPECT_EQ(a.root, BenchArgs::kAllRoots);
  EXPECT_EQ(parse({"-d", "bfloat16"}).types[0], DataType::kBFloat16);
  EXPECT_EQ(parse({"-d", "half"}).types[0], DataType::kFloat16);
  EXPECT_EQ(parse({"-d", "uint64"}).types[0], DataType::kUint64);
  EXPECT_EQ(parse({"-o", "avg"}).ops[0], RedOp::kAvg);
  EXPECT_EQ(parse({"-r", "3"}).root, 3);
  for (DataType t : allTypes()) {
    DataType parsed;
    EXPECT_TRUE(parseDataType(dataTypeName(t), &parsed) && parsed == t) << dataTypeName(t);
  }
  for (RedOp o : allOps()) {
    RedOp parsed;
    EXPECT_TRUE(parseRedOp(redOpName(o), &parsed) && parsed == o) << redOpName(o);
  }
}

TEST(PerfArgs, BadValuesAreRejectedWithAMessage) {
  struct Case {
    std::vector<std::string> words;
    std::string needle;  // must appear in the message
  };
  const Case cases[] = {
      {{"-b", "foo"}, "-b/--minbytes: 'foo' is not a byte size"},
      {{"-e", "12Q"}, "-e/--maxbytes: '12Q'"},
      {{"-b", "1M", "-e", "8"}, "larger than -e/--maxbytes"},
      {{"-n", "0"}, "-n/--iters: 0 is out of range"},
      {{"-n", "x"}, "-n/--iters: 'x' is not an integer"},
      {{"-w", "-1"}, "-w/--warmup_iters"},
      {{"-f", "-2"}, "-f/--stepfactor: -2 is out of range"},
      {{"-f", "2x"}, "-f/--stepfactor: '2x' is not an integer"},
      {{"-i", "0"}, "-i/--stepbytes"},
      {{"-t", "0"}, "-t/--nthreads: 0 is out of range [1, 1024]"},
      {{"-t", "-2"}, "-t/--nthreads: -2 is out of range"},
      {{"-t", "two"}, "-t/--nthreads: 'two' is not an integer"},
      {{"--nthreads="}, "-t/--nthreads: '' is not an integer"},
      {{"-t", "2", "--baseline", "mpi"}, "cannot run beside -t/--nthreads 2"},
      {{"-g", "8"}, "-g/--ngpus: must be 1 (one device per process, which its -t threads share)"},
      {{"-m", "4"}, "-m/--agg_iters: must be 1"},
      {{"-p", "1"}, "-p/--parallel_init: must be 0"},
      {{"-G", "1"}, "-G/--cudagraph: must be 0"},
      {{"-c", "2"}, "-c/--check"},
      {{"-z", "2"}, "-z/--blocking"},
      {{"-a", "4"}, "-a/--average: 4 is out of range [0, 3]"},
      {{"-d", "float17"}, "unknown datatype 'float17'"},
      {{"-o", "xor"}, "unknown op 'xor'"},
      {{"-r", "-2"}, "-r/--root"},
      {{"--algo", "fast"}, "unknown algorithm 'fast'"},
      {{"--transport", "ib"}, "unknown transport 'ib'"},
      {{"--baseline", "nccl"}, "unknown baseline 'nccl'"},
      {{"--bogus", "1"}, "unknown flag '--bogus'"},
      {{"-q"}, "unknown flag '-q'"},
      {{"-b"}, "-b/--minbytes: missing value"},
      {{"stray"}, "unexpected argument 'stray'"},
      {{"-J", ""}, "-J/--output_file: empty file name"},
      {{"--device", "gpu"}, "--device: unknown device 'gpu' (host cuda)"},
      {{"--device", "cuda", "--baseline", "mpi"}, "cannot run beside --device cuda"},
      {{"-R", "3"}, "-R/--local_register: 3 is out of range [0, 2]"},
      {{"--device", "cuda", "-R", "1"}, "--device cuda has no registration yet"},
  };
  for (const Case& c : cases) {
    std::string message = errorOf(c.words);
    EXPECT_NE(message.find(c.needle), std::string::npos)
        << "words[0]=" << c.words[0] << " message='" << message << "' wanted '" << c.needle << "'";
  }
}

TEST(PerfArgs, DeviceHostOrCuda) {
  EXPECT_FALSE(parse({}).deviceCuda);
  EXPECT_FALSE(parse({"--device", "host"}).deviceCuda);
  EXPECT_TRUE(parse({"--device=cuda"}).deviceCuda);
  EXPECT_NE(usage("all_reduce_perf").find("--device"), std::string::npos);
}

TEST(PerfArgs, ThreadsPerProcess) {
  EXPECT_EQ(parse({}).threads, 1);
  EXPECT_EQ(parse({"-t", "4"}).threads, 4);
  EXPECT_EQ(parse({"-t2"}).threads, 2);
  EXPECT_EQ(parse({"--nthreads=3", "--device", "cuda"}).threads, 3);
  EXPECT_NE(usage("all_reduce_perf").find("ranks per process, as threads"), std::string::npos);
}

TEST(PerfArgs, RegistrationIsNcclTestsMinusR) {
  EXPECT_EQ(parse({}).registration, 0);
  EXPECT_EQ(parse({"-R", "1"}).registration, 1);
  EXPECT_EQ(parse({"--local_register=2"}).registration, 2);
  EXPECT_NE(usage("all_reduce_perf").find("braid::memAlloc"), std::string::npos);
}

TEST(PerfArgs, HelpAndUsage) {
  EXPECT_TRUE(parse({"-h"}).help);
  EXPECT_TRUE(parse({"--help"}).help);
  std::string text = usage("all_reduce_perf");
  EXPECT_NE(text.find("all_reduce_perf"), std::string::npos);
  EXPECT_NE(text.find("--baseline"), std::string::npos);
}

}  // namespace
}  // namespace braid::bench
