// Small text helpers shared by the descriptor and topology-file code: escaping, key=value
// fields, and numbers with units. Internal to topology/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace braid::topology::text {

/// The largest count or index (ranks, cores, a GPU, a NUMA node) the topology formats take: the
/// file and the rank descriptor share it, so a graph built from descriptors dumps to a file that
/// loads.
inline constexpr int64_t kMaxCount = 1 << 24;

/// Escapes the characters that would split a field (space, tab, newline, '=', ',', ';', '%',
/// '#', '[', ']') and control characters as %XX, so any string survives as one value ("" stays "").
std::string escape(const std::string& value);
/// Inverse of escape(); nullopt when a %XX is malformed.
std::optional<std::string> unescape(const std::string& value);

/// Splits a line on blanks, dropping a trailing "# comment".
std::vector<std::string> words(const std::string& line);

/// One "key=value" word split at its first '='; nullopt when there is no '=' or no key.
std::optional<std::pair<std::string, std::string>> keyValue(const std::string& word);

/// Parses a whole integer / non-negative real; nullopt on junk or trailing characters.
std::optional<int64_t> parseInt(const std::string& text);
std::optional<double> parseReal(const std::string& text);

/// "100Gbit/s", "12.5GB/s", "800Mbit", "9.4GB/s" -> GB/s (1e9 bytes per second). The unit is
/// required ("/s" optional): Gbit, Mbit, Tbit, GB, MB, TB (decimal). nullopt otherwise.
std::optional<double> parseBandwidth(const std::string& text);
/// "5us", "0.5us", "800ns", "1ms", "2s" -> microseconds. The unit is required.
std::optional<double> parseLatency(const std::string& text);
/// Writes GB/s back the way parseBandwidth reads it ("12.5GB/s"), exactly round-tripping.
std::string formatBandwidth(double gbytesPerSec);
/// Writes microseconds back ("0.5us").
std::string formatLatency(double us);

/// Parses "0-3,8,10-11" into the listed integers in order; nullopt on junk or a reversed range.
std::optional<std::vector<int>> parseIntList(const std::string& text);
/// The same list as inclusive ranges ({0,3},{8,8},{10,11}): its size is known before it is made.
std::optional<std::vector<std::pair<int, int>>> parseIntRanges(const std::string& text);
/// Writes a sorted-or-not list compactly ("0-3,8").
std::string formatIntList(const std::vector<int>& values);

/// The shortest decimal text that reads back as exactly `value`.
std::string formatReal(double value);

}  // namespace braid::topology::text
