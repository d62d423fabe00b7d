// Reading BRAID_* and launcher variables with errors that name the variable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/error.h"

namespace braid {

/// The variable's value, or nullopt when unset or empty.
std::optional<std::string> envString(const char* name);
/// Parses an integer; throws kInvalidUsage "NAME='x' is not an integer" on junk.
std::optional<int64_t> envInt(const char* name);
int64_t envInt(const char* name, int64_t fallback);
double envDouble(const char* name, double fallback);
/// Parses a byte size with optional K/M/G suffix (powers of 1024), e.g. "128K".
std::optional<uint64_t> envBytes(const char* name);
/// Parses "123", "64K", "2M", "1G" (powers of 1024); nullopt when malformed.
std::optional<uint64_t> parseBytes(const std::string& text);

}  // namespace braid
