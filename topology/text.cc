#include "topology/text.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace braid::topology::text {
namespace {

bool needsEscape(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '=' || c == ',' || c == ';' ||
         c == '%' || c == '#' || c == '[' || c == ']' || static_cast<unsigned char>(c) < 0x20;
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Splits "12.5GB/s" into its number and its unit (without "/s").
bool splitUnit(const std::string& text, double* number, std::string* unit) {
  if (text.empty()) return false;
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(begin, &end);
  if (end == begin || errno != 0 || !std::isfinite(value) || value < 0) return false;
  std::string rest(end);
  if (rest.size() >= 2 && rest.compare(rest.size() - 2, 2, "/s") == 0) {
    rest.resize(rest.size() - 2);
  }
  *number = value;
  *unit = rest;
  return true;
}

}  // namespace

std::string escape(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (needsEscape(c)) {
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<std::string> unescape(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] != '%') {
      out += value[i];
      continue;
    }
    if (i + 2 >= value.size()) return std::nullopt;
    int hi = hexValue(value[i + 1]), lo = hexValue(value[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::vector<std::string> words(const std::string& line) {
  std::string body = line.substr(0, line.find('#'));
  std::istringstream in(body);
  std::vector<std::string> out;
  std::string word;
  while (in >> word) out.push_back(word);
  return out;
}

std::optional<std::pair<std::string, std::string>> keyValue(const std::string& word) {
  size_t eq = word.find('=');
  if (eq == std::string::npos || eq == 0) return std::nullopt;
  return std::make_pair(word.substr(0, eq), word.substr(eq + 1));
}

std::optional<int64_t> parseInt(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(begin, &end, 10);
  if (end == begin || *end != '\0' || errno != 0) return std::nullopt;
  return static_cast<int64_t>(value);
}

std::optional<double> parseReal(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(begin, &end);
  if (end == begin || *end != '\0' || errno != 0 || !std::isfinite(value) || value < 0) {
    return std::nullopt;
  }
  return value;
}

std::optional<double> parseBandwidth(const std::string& text) {
  double number;
  std::string unit;
  if (!splitUnit(text, &number, &unit)) return std::nullopt;
  if (unit == "GB") return number;
  if (unit == "MB") return number / 1e3;
  if (unit == "TB") return number * 1e3;
  if (unit == "Gbit" || unit == "Gb") return number / 8;
  if (unit == "Mbit" || unit == "Mb") return number / 8e3;
  if (unit == "Tbit" || unit == "Tb") return number * 1e3 / 8;
  return std::nullopt;
}

std::optional<double> parseLatency(const std::string& text) {
  double number;
  std::string unit;
  if (!splitUnit(text, &number, &unit)) return std::nullopt;
  if (unit == "us") return number;
  if (unit == "ns") return number / 1e3;
  if (unit == "ms") return number * 1e3;
  if (unit == "s") return number * 1e6;
  return std::nullopt;
}

std::string formatReal(double value) {
  return fmt::format("{}", value);  // fmt's shortest text that reads back exactly
}

std::string formatBandwidth(double gbytesPerSec) { return formatReal(gbytesPerSec) + "GB/s"; }

std::string formatLatency(double us) { return formatReal(us) + "us"; }

std::optional<std::vector<std::pair<int, int>>> parseIntRanges(const std::string& text) {
  std::vector<std::pair<int, int>> out;
  if (text.empty()) return out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t dash = item.find('-', 1);
    if (dash == std::string::npos) {
      auto v = parseInt(item);
      if (!v || *v < 0 || *v > kMaxCount) return std::nullopt;
      out.emplace_back(static_cast<int>(*v), static_cast<int>(*v));
      continue;
    }
    auto lo = parseInt(item.substr(0, dash)), hi = parseInt(item.substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi < *lo || *hi > kMaxCount) return std::nullopt;
    out.emplace_back(static_cast<int>(*lo), static_cast<int>(*hi));
  }
  if (text.back() == ',') return std::nullopt;
  return out;
}

std::optional<std::vector<int>> parseIntList(const std::string& text) {
  auto ranges = parseIntRanges(text);
  if (!ranges) return std::nullopt;
  std::vector<int> out;
  for (const auto& [lo, hi] : *ranges) {
    for (int64_t v = lo; v <= hi; ++v) out.push_back(static_cast<int>(v));
  }
  return out;
}

std::string formatIntList(const std::vector<int>& values) {
  std::string out;
  for (size_t i = 0; i < values.size();) {
    size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1) ++j;
    if (!out.empty()) out += ',';
    if (j >= i + 2) {
      out += fmt::format("{}-{}", values[i], values[j]);
    } else {
      out += std::to_string(values[i]);
      if (j == i + 1) out += fmt::format(",{}", values[j]);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace braid::topology::text
