#include "common/env.h"

#include <cerrno>
#include <cstdlib>

namespace braid {

std::optional<std::string> envString(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::optional<int64_t> envInt(const char* name) {
  auto text = envString(name);
  if (!text) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text->c_str(), &end, 10);
  BRAID_ENFORCE(errno == 0 && end != text->c_str() && *end == '\0', ErrorCode::kInvalidUsage,
                "environment variable {}='{}' is not an integer", name, *text);
  return value;
}

int64_t envInt(const char* name, int64_t fallback) { return envInt(name).value_or(fallback); }

double envDouble(const char* name, double fallback) {
  auto text = envString(name);
  if (!text) return fallback;
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(text->c_str(), &end);
  BRAID_ENFORCE(errno == 0 && end != text->c_str() && *end == '\0', ErrorCode::kInvalidUsage,
                "environment variable {}='{}' is not a number", name, *text);
  return value;
}

std::optional<uint64_t> parseBytes(const std::string& text) {
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || text[0] == '-') return std::nullopt;
  uint64_t scale = 1;
  switch (*end) {
    case '\0':
      break;
    case 'k':
    case 'K':
      scale = 1ull << 10;
      ++end;
      break;
    case 'm':
    case 'M':
      scale = 1ull << 20;
      ++end;
      break;
    case 'g':
    case 'G':
      scale = 1ull << 30;
      ++end;
      break;
    default:
      return std::nullopt;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0') return std::nullopt;
  if (value > UINT64_MAX / scale) return std::nullopt;
  return value * scale;
}

std::optional<uint64_t> envBytes(const char* name) {
  auto text = envString(name);
  if (!text) return std::nullopt;
  auto value = parseBytes(*text);
  BRAID_ENFORCE(value.has_value(), ErrorCode::kInvalidUsage,
                "environment variable {}='{}' is not a byte size (like 4096, 64K, 2M)", name,
                *text);
  return value;
}

}  // namespace braid
