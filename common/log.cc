#include "common/log.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace braid {
namespace {

LogLevel levelFromEnv() {
  const char* value = std::getenv("BRAID_DEBUG");
  if (value == nullptr) return LogLevel::kWarn;
  if (strcasecmp(value, "TRACE") == 0) return LogLevel::kTrace;
  if (strcasecmp(value, "INFO") == 0) return LogLevel::kInfo;
  if (strcasecmp(value, "ERROR") == 0) return LogLevel::kError;
  return LogLevel::kWarn;
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

}  // namespace

bool logEnabled(LogLevel level) {
  static const LogLevel threshold = levelFromEnv();
  return level <= threshold;
}

void logLine(LogLevel level, const std::string& message) {
  std::string line = fmt::format("braid {} [pid {}] {}\n", levelName(level), getpid(), message);
  // One write() so lines from several ranks do not interleave.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace braid
