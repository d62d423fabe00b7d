#include "common/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

namespace braid {
namespace {

constexpr std::array<const char*, size_t(LogSubsys::kCount)> kSubsysNames = {
    "INIT", "NET", "TUNE", "COLL", "TRAIN", "TORCH", "OTHER"};

LogLevel levelFromEnv() {
  const char* value = std::getenv("BRAID_DEBUG");
  if (value == nullptr) return LogLevel::kWarn;
  if (strcasecmp(value, "TRACE") == 0) return LogLevel::kTrace;
  if (strcasecmp(value, "INFO") == 0) return LogLevel::kInfo;
  if (strcasecmp(value, "ERROR") == 0) return LogLevel::kError;
  return LogLevel::kWarn;
}

/// Bit i set: subsystem i is logged. BRAID_DEBUG_SUBSYS="A,B" sets A and B, "^A,B" all but
/// them; an unknown name is warned about once and ignored.
uint32_t subsysMaskFromEnv() {
  const uint32_t all = (1u << size_t(LogSubsys::kCount)) - 1;
  const char* value = std::getenv("BRAID_DEBUG_SUBSYS");
  if (value == nullptr || *value == '\0') return all;
  std::string list = value;
  const bool exclude = list[0] == '^';
  if (exclude) list.erase(0, 1);
  uint32_t named = 0;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string name = list.substr(start, comma - start);
    bool known = name.empty();
    for (size_t i = 0; i < kSubsysNames.size(); ++i) {
      if (strcasecmp(name.c_str(), kSubsysNames[i]) == 0) {
        named |= 1u << i;
        known = true;
      }
    }
    if (!known) {
      const std::string warning = fmt::format(
          "braid WARN BRAID_DEBUG_SUBSYS: unknown subsystem '{}' ignored (INIT, NET, TUNE, "
          "COLL, TRAIN, TORCH, OTHER)\n",
          name);
      ssize_t ignored = ::write(STDERR_FILENO, warning.data(), warning.size());
      (void)ignored;
    }
    start = comma + 1;
  }
  return exclude ? all & ~named : named;
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return "ERROR";
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kTrace:
      return "TRACE";
  }
  return "?";
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

/// The launcher's rank for %r (torchrun/braidrun RANK, mpirun's), or "-".
std::string launcherRank() {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    if (const char* v = std::getenv(name)) return v;
  }
  return "-";
}

/// BRAID_DEBUG_FILE with %h, %p, %r and %% expanded.
std::string expandPath(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    switch (pattern[++i]) {
      case 'h':
        out += hostName();
        break;
      case 'p':
        out += std::to_string(getpid());
        break;
      case 'r':
        out += launcherRank();
        break;
      case '%':
        out += '%';
        break;
      default:
        out += '%';
        out += pattern[i];
    }
  }
  return out;
}

/// Where lines go: stderr, or the file BRAID_DEBUG_FILE names (opened once, appending; when it
/// cannot be opened, stderr with one warning). A forked child writes to the parent's file.
int logFd() {
  static const int fd = [] {
    const char* pattern = std::getenv("BRAID_DEBUG_FILE");
    if (pattern == nullptr || *pattern == '\0') return int(STDERR_FILENO);
    const std::string path = expandPath(pattern);
    const int f = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (f >= 0) return f;
    const std::string warning =
        fmt::format("braid WARN BRAID_DEBUG_FILE: cannot open '{}' ({}); logging to stderr\n", path,
                    std::strerror(errno));
    ssize_t ignored = ::write(STDERR_FILENO, warning.data(), warning.size());
    (void)ignored;
    return int(STDERR_FILENO);
  }();
  return fd;
}

thread_local int tRank = -1;

}  // namespace

const char* logSubsysName(LogSubsys subsys) {
  const size_t i = size_t(subsys);
  return i < kSubsysNames.size() ? kSubsysNames[i] : "?";
}

LogSubsys logSubsysOf(const char* file) {
  auto in = [file](const char* part) { return std::strstr(file, part) != nullptr; };
  if (in("/transport/")) return LogSubsys::kNet;
  if (in("/comm/bootstrap/") || in("/comm/create/") || in("/comm/init.cc") ||
      in("/comm/mpi_init.cc")) {
    return LogSubsys::kInit;
  }
  if (in("/comm/tuner")) return LogSubsys::kTune;
  if (in("/comm/")) return LogSubsys::kColl;
  if (in("/trainer/")) return LogSubsys::kTrain;
  if (in("/python/")) return LogSubsys::kTorch;
  return LogSubsys::kOther;
}

bool logLevelEnabled(LogLevel level) {
  static const LogLevel threshold = levelFromEnv();
  return level <= threshold;
}

bool logEnabled(LogLevel level, LogSubsys subsys) {
  static const uint32_t mask = subsysMaskFromEnv();
  return logLevelEnabled(level) && (mask >> size_t(subsys) & 1u) != 0;
}

void setLogRank(int rank) { tRank = rank; }

void logLine(LogLevel level, LogSubsys subsys, const std::string& message) {
  static const std::string host = hostName();
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const int millis = int(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  const std::string rank = tRank >= 0 ? fmt::format("r{}", tRank) : "r-";
  std::string line = fmt::format("braid {} {}.{:03d}Z {}:{} {} {} {}\n", levelName(level), stamp,
                                 millis, host, getpid(), rank, logSubsysName(subsys), message);
  // One write() so lines from several ranks do not interleave.
  ssize_t ignored = ::write(logFd(), line.data(), line.size());
  (void)ignored;
}

}  // namespace braid
