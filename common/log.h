// Logging to stderr (or BRAID_DEBUG_FILE), filtered by level and subsystem:
//   BRAID_DEBUG=ERROR|WARN|INFO|TRACE     the level (default WARN); TRACE also logs the start and
//                                         end of every collective with its sequence number
//   BRAID_DEBUG_SUBSYS=INIT,NET,...       only these subsystems ("^NET,TUNE": all but these);
//                                         INIT (creation, bootstrap), NET (transports), TUNE (the
//                                         tuner), COLL (collectives, the queue, the engine),
//                                         TRAIN (the trainer), TORCH (braid_torch), OTHER
//   BRAID_DEBUG_FILE=path.%h.%p           one file per process instead of stderr (%h host, %p
//                                         pid, %r the launcher's rank, %% a percent sign)
// A line: "braid INFO 2026-11-26T03:41:07.123Z host:1234 r1 NET <message>" ("r-" while the
// thread has no rank). A call site's subsystem is its source folder (logSubsysOf(__FILE__)).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace braid {

enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kTrace = 3 };
enum class LogSubsys : uint8_t { kInit, kNet, kTune, kColl, kTrain, kTorch, kOther, kCount };

/// "INIT", "NET", ...
const char* logSubsysName(LogSubsys subsys);
/// The subsystem of a source file by its path: transport/ NET; comm/bootstrap/, comm/create/,
/// comm/init.cc INIT; the tuner TUNE; the rest of comm/ COLL; trainer/ TRAIN; python/ TORCH.
LogSubsys logSubsysOf(const char* file);
/// True when BRAID_DEBUG asks for `level` or more (the cheap first test of every call site).
bool logLevelEnabled(LogLevel level);
/// ... and BRAID_DEBUG_SUBSYS lets `subsys` through.
bool logEnabled(LogLevel level, LogSubsys subsys);
/// Writes one line (see above) atomically: one write(), so lines of several ranks never mix.
void logLine(LogLevel level, LogSubsys subsys, const std::string& message);
/// The rank this thread works for, shown in its lines (-1: none). Communicators set it on the
/// threads that run their calls.
void setLogRank(int rank);

template <typename... Args>
void logAt(LogLevel level, LogSubsys subsys, fmt::format_string<Args...> format, Args&&... args) {
  if (logEnabled(level, subsys)) {
    logLine(level, subsys, fmt::format(format, std::forward<Args>(args)...));
  }
}

}  // namespace braid

#define BRAID_LOG_AT_(level, ...)                                         \
  do {                                                                    \
    if (::braid::logLevelEnabled(level)) {                                \
      ::braid::logAt(level, ::braid::logSubsysOf(__FILE__), __VA_ARGS__); \
    }                                                                     \
  } while (0)
#define BRAID_WARN(...) BRAID_LOG_AT_(::braid::LogLevel::kWarn, __VA_ARGS__)
#define BRAID_INFO(...) BRAID_LOG_AT_(::braid::LogLevel::kInfo, __VA_ARGS__)
#define BRAID_TRACE(...) BRAID_LOG_AT_(::braid::LogLevel::kTrace, __VA_ARGS__)
