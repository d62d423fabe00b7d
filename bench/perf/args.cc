#include "bench/perf/args.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <optional>

#include "bench/format/names.h"
#include "common/env.h"
#include "common/error.h"

namespace braid::bench {
namespace {

struct Flag {
  char shortName;  // '\0' for long-only flags
  const char* longName;
};

// -t's bound: far past the cores of any host, so a typo (-t 1000000) is an error, not a hang.
constexpr int64_t kMaxThreads = 1024;

constexpr Flag kFlags[] = {
    {'t', "nthreads"},       {'g', "ngpus"},         {'b', "minbytes"},    {'e', "maxbytes"},
    {'i', "stepbytes"},      {'f', "stepfactor"},    {'n', "iters"},       {'m', "agg_iters"},
    {'w', "warmup_iters"},   {'p', "parallel_init"}, {'c', "check"},       {'o', "op"},
    {'d', "datatype"},       {'r', "root"},          {'z', "blocking"},    {'G', "cudagraph"},
    {'C', "report_cputime"}, {'a', "average"},       {'J', "output_file"}, {'\0', "algo"},
    {'\0', "transport"},     {'\0', "baseline"},     {'\0', "seed"},        {'\0', "device"},
    {'R', "local_register"},
};

std::string flagLabel(const Flag& flag) {
  if (flag.shortName == '\0') return fmt::format("--{}", flag.longName);
  return fmt::format("-{}/--{}", flag.shortName, flag.longName);
}

int64_t parseInt(const Flag& flag, const std::string& text, int64_t lo, int64_t hi, int base = 10) {
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, base);
  BRAID_ENFORCE(errno == 0 && !text.empty() && *end == '\0', ErrorCode::kInvalidUsage,
                "{}: '{}' is not an integer", flagLabel(flag), text);
  BRAID_ENFORCE(value >= lo && value <= hi, ErrorCode::kInvalidUsage,
                "{}: {} is out of range [{}, {}]", flagLabel(flag), value, lo, hi);
  return value;
}

uint64_t parseSize(const Flag& flag, const std::string& text) {
  auto bytes = parseBytes(text);
  BRAID_ENFORCE(bytes.has_value(), ErrorCode::kInvalidUsage,
                "{}: '{}' is not a byte size (like 8, 64K, 2M, 1G)", flagLabel(flag), text);
  return *bytes;
}

/// Flags that exist for GPUs only: accepted when they ask for what a host run does anyway.
void requireValue(const Flag& flag, const std::string& text, int64_t expected, const char* why) {
  int64_t value = parseInt(flag, text, INT32_MIN, INT32_MAX);
  BRAID_ENFORCE(value == expected, ErrorCode::kInvalidUsage, "{}: must be {} ({}), got {}",
                flagLabel(flag), expected, why, value);
}

void apply(BenchArgs& args, const Flag& flag, const std::string& value) {
  const std::string name = flag.longName;
  if (name == "nthreads") {
    args.threads = static_cast<int>(parseInt(flag, value, 1, kMaxThreads));
  } else if (name == "ngpus") {
    requireValue(flag, value, 1, "one device per process, which its -t threads share");
  } else if (name == "minbytes") {
    args.minBytes = parseSize(flag, value);
  } else if (name == "maxbytes") {
    args.maxBytes = parseSize(flag, value);
  } else if (name == "stepbytes") {
    args.stepBytes = parseSize(flag, value);
    BRAID_ENFORCE(args.stepBytes > 0, ErrorCode::kInvalidUsage, "{}: must be positive",
                  flagLabel(flag));
  } else if (name == "stepfactor") {
    // As nccl-tests (strtol, base 0): any non-negative factor; 0 and 1 mean "step by -i".
    args.stepFactor = parseInt(flag, value, 0, INT64_MAX, 0);
  } else if (name == "iters") {
    args.iters = parseInt(flag, value, 1, 1 << 30);
  } else if (name == "agg_iters") {
    requireValue(flag, value, 1, "no grouped launches on host memory");
  } else if (name == "warmup_iters") {
    args.warmupIters = parseInt(flag, value, 0, 1 << 30);
  } else if (name == "parallel_init") {
    requireValue(flag, value, 0, "the -t threads join together anyway");
  } else if (name == "check") {
    args.check = parseInt(flag, value, 0, 1) == 1;
  } else if (name == "op") {
    args.opName = value;
    if (value == "all") {
      args.ops = allOps();
    } else {
      RedOp op;
      BRAID_ENFORCE(parseRedOp(value.c_str(), &op), ErrorCode::kInvalidUsage,
                    "{}: unknown op '{}' (sum prod max min avg all)", flagLabel(flag), value);
      args.ops = {op};
    }
  } else if (name == "datatype") {
    args.typeName = value;
    if (value == "all") {
      args.types = allTypes();
    } else {
      DataType type;
      BRAID_ENFORCE(parseDataType(value.c_str(), &type), ErrorCode::kInvalidUsage,
                    "{}: unknown datatype '{}' (int8 uint8 int32 uint32 int64 uint64 half float "
                    "double bfloat16 all)",
                    flagLabel(flag), value);
      args.types = {type};
    }
  } else if (name == "root") {
    args.root = value == "all" ? BenchArgs::kAllRoots : parseInt(flag, value, 0, INT32_MAX);
  } else if (name == "blocking") {
    args.blocking = parseInt(flag, value, 0, 1) == 1;
  } else if (name == "local_register") {
    args.registration = static_cast<int>(parseInt(flag, value, 0, 2));
  } else if (name == "cudagraph") {
    requireValue(flag, value, 0, "no CUDA graphs on host memory");
  } else if (name == "report_cputime") {
    parseInt(flag, value, 0, 1);  // accepted; host times are CPU times already
  } else if (name == "average") {
    args.average = static_cast<Average>(parseInt(flag, value, 0, 3));
  } else if (name == "output_file") {
    BRAID_ENFORCE(!value.empty(), ErrorCode::kInvalidUsage, "{}: empty file name", flagLabel(flag));
    args.outputFile = value;
  } else if (name == "algo") {
    BRAID_ENFORCE(parseAlgorithm(value, &args.algorithm), ErrorCode::kInvalidUsage,
                  "{}: unknown algorithm '{}' (auto ring oneshot chain tree hier)", flagLabel(flag),
                  value);
  } else if (name == "transport") {
    BRAID_ENFORCE(value == "shm" || value == "tcp" || value == "ucx" || value == "ofi" ||
                      value == "verbs" || value == "auto",
                  ErrorCode::kInvalidUsage, "{}: unknown transport '{}' (shm tcp ucx ofi verbs auto)",
                  flagLabel(flag), value);
    args.transport = value == "auto" ? "" : value;
  } else if (name == "baseline") {
    BRAID_ENFORCE(value == "mpi" || value == "none", ErrorCode::kInvalidUsage,
                  "{}: unknown baseline '{}' (mpi none)", flagLabel(flag), value);
    args.baselineMpi = value == "mpi";
  } else if (name == "seed") {
    args.seed = static_cast<uint64_t>(parseInt(flag, value, 0, INT64_MAX));
  } else if (name == "device") {
    BRAID_ENFORCE(value == "host" || value == "cuda", ErrorCode::kInvalidUsage,
                  "{}: unknown device '{}' (host cuda)", flagLabel(flag), value);
    args.deviceCuda = value == "cuda";
  }
}

const Flag* findShort(char c) {
  for (const auto& flag : kFlags) {
    if (flag.shortName == c) return &flag;
  }
  return nullptr;
}

const Flag* findLong(const std::string& name) {
  for (const auto& flag : kFlags) {
    if (name == flag.longName) return &flag;
  }
  return nullptr;
}

}  // namespace

std::vector<uint64_t> BenchArgs::sizes() const {
  std::vector<uint64_t> out;
  for (uint64_t size = minBytes; size <= maxBytes;) {
    out.push_back(size);
    uint64_t next = 0;
    bool overflow = stepFactor > 1 ? __builtin_mul_overflow(size, stepFactor, &next)
                                   : __builtin_add_overflow(size, stepBytes, &next);
    if (overflow || next <= size) break;  // size 0 with a factor, or past 2^64
    size = next;
  }
  return out;
}

BenchArgs parseArgs(const std::vector<std::string>& argv) {
  BenchArgs args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& word = argv[i];
    const Flag* flag = nullptr;
    std::optional<std::string> value;
    if (word == "-h" || word == "--help") {
      args.help = true;
      continue;
    }
    if (word.rfind("--", 0) == 0 && word.size() > 2) {
      std::string name = word.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      flag = findLong(name);
      BRAID_ENFORCE(flag != nullptr, ErrorCode::kInvalidUsage, "unknown flag '{}' (see -h)", word);
    } else if (word.size() >= 2 && word[0] == '-') {
      flag = findShort(word[1]);
      BRAID_ENFORCE(flag != nullptr, ErrorCode::kInvalidUsage, "unknown flag '{}' (see -h)", word);
      if (word.size() > 2) value = word.substr(2);
    } else {
      fail(ErrorCode::kInvalidUsage, "unexpected argument '{}' (see -h)", word);
    }
    if (!value) {
      BRAID_ENFORCE(i + 1 < argv.size(), ErrorCode::kInvalidUsage, "{}: missing value",
                    flagLabel(*flag));
      value = argv[++i];
    }
    apply(args, *flag, *value);
  }
  BRAID_ENFORCE(args.minBytes <= args.maxBytes, ErrorCode::kInvalidUsage,
                "-b/--minbytes {} is larger than -e/--maxbytes {}", args.minBytes, args.maxBytes);
  BRAID_ENFORCE(args.stepFactor > 1 || args.stepBytes > 0, ErrorCode::kInvalidUsage,
                "-i/--stepbytes must be positive");
  BRAID_ENFORCE(!(args.deviceCuda && args.baselineMpi), ErrorCode::kInvalidUsage,
                "--baseline mpi times host buffers; it cannot run beside --device cuda");
  BRAID_ENFORCE(!(args.baselineMpi && args.threads > 1), ErrorCode::kInvalidUsage,
                "--baseline mpi times one rank per process; it cannot run beside -t/--nthreads {}",
                args.threads);
  BRAID_ENFORCE(!(args.deviceCuda && args.registration != 0), ErrorCode::kInvalidUsage,
                "-R/--local_register {}: registers host buffers (braid::memAlloc); --device cuda "
                "has no registration yet",
                args.registration);
  return args;
}

std::string usage(const std::string& program) {
  return fmt::format(
      "USAGE: {} \n"
      "  [-t,--nthreads <ranks per process, as threads>] (default 1)\n"
      "  [-g,--ngpus <1>] (one device per process, shared by its threads: must be 1)\n"
      "  [-b,--minbytes <min size in bytes, K/M/G suffix>] (default 32M)\n"
      "  [-e,--maxbytes <max size in bytes>] (default 32M)\n"
      "  [-i,--stepbytes <increment size>] (default 1M)\n"
      "  [-f,--stepfactor <increment factor>] (default 1: use -i)\n"
      "  [-n,--iters <iteration count>] (default 20)\n"
      "  [-m,--agg_iters <1>]\n"
      "  [-w,--warmup_iters <warmup iteration count>] (default 5)\n"
      "  [-p,--parallel_init <0>]\n"
      "  [-c,--check <0/1>] (default 1)\n"
      "  [-o,--op <sum/prod/min/max/avg/all>] (default sum)\n"
      "  [-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/bfloat16/all>]"
      " (default float)\n"
      "  [-r,--root <root rank/all>] (default 0)\n"
      "  [-z,--blocking <0/1>] (0: non-blocking API then wait; 1: blocking API; default 0)\n"
      "  [-a,--average <0/1/2/3>] report time of rank 0/average/min/max (default 1)\n"
      "  [-J,--output_file <file>] write the results as JSON\n"
      "  [-G,--cudagraph <0>] [-C,--report_cputime <0/1>]\n"
      "  [-R,--local_register <0/1/2>] 1, 2: host buffers from braid::memAlloc, which the ranks\n"
      "      of a host map into each other (one-copy all-reduce); 0: ordinary memory (default)\n"
      "  [--algo <auto/ring/oneshot/chain>] (default auto)\n"
      "  [--transport <shm/tcp/ucx/ofi/verbs/auto>] (default auto)\n"
      "  [--baseline <mpi/none>] time the matching MPI collective too (under mpirun)\n"
      "  [--device <host/cuda>] buffers in host memory (default) or on GPU LOCAL_RANK % #GPUs\n"
      "  [--seed <n>] seed of the validation data\n"
      "  [-h,--help]\n"
      "Launch with braidrun/torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), with mpirun,\n"
      "or alone (one process); each process runs -t ranks as threads.\n",
      program);
}

}  // namespace braid::bench
