// Logging to stderr, filtered by BRAID_DEBUG=WARN|INFO|TRACE (default WARN).
#pragma once

#include <fmt/format.h>

#include <string>

namespace braid {

enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

/// True when BRAID_DEBUG asks for `level` or more.
bool logEnabled(LogLevel level);
/// Writes one line "braid <LEVEL> [host:pid] message" to stderr atomically.
void logLine(LogLevel level, const std::string& message);

template <typename... Args>
void logAt(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (logEnabled(level)) logLine(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace braid

#define BRAID_WARN(...) ::braid::logAt(::braid::LogLevel::kWarn, __VA_ARGS__)
#define BRAID_INFO(...) ::braid::logAt(::braid::LogLevel::kInfo, __VA_ARGS__)
#define BRAID_TRACE(...) ::braid::logAt(::braid::LogLevel::kTrace, __VA_ARGS__)
