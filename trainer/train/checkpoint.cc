#include "trainer/train/checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/error.h"

namespace braid::trainer {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'B', 'R', 'A', 'I', 'D', 'C', 'K', 'P'};
// magic, version, reserved, total length: the part read before anything else.
constexpr size_t kPrefixBytes = sizeof kMagic + 4 + 4 + 8;
constexpr size_t kChecksumBytes = 8;
constexpr uint32_t kLossScaleTag = 0x4c43534c;  // "LSCL" little-endian

uint64_t fnv1a(const char* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    const char* p = reinterpret_cast<const char*>(&v);
    out_.insert(out_.end(), p, p + sizeof v);
  }
  void putBytes(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    out_.insert(out_.end(), c, c + n);
  }
  void putString(const std::string& s) {
    put<uint64_t>(s.size());
    putBytes(s.data(), s.size());
  }
  template <typename T>
  void putVector(const std::vector<T>& v) {
    put<uint64_t>(v.size());
    if (!v.empty()) putBytes(v.data(), v.size() * sizeof(T));
  }
  std::vector<char>& bytes() { return out_; }

 private:
  std::vector<char> out_;
};

/// Bounds-checked reads from a verified buffer; a short read means an inconsistent file.
class Reader {
 public:
  Reader(const std::vector<char>& bytes, size_t begin, size_t end, const std::string& file)
      : bytes_(bytes), at_(begin), end_(end), file_(file) {}
  template <typename T>
  T get() {
    T v;
    take(&v, sizeof v);
    return v;
  }
  std::string getString() {
    const uint64_t n = get<uint64_t>();
    need(n);
    std::string s(bytes_.data() + at_, n);
    at_ += n;
    return s;
  }
  template <typename T>
  std::vector<T> getVector() {
    const uint64_t n = get<uint64_t>();
    BRAID_ENFORCE(n <= (end_ - at_) / sizeof(T), ErrorCode::kInvalidUsage,
                  "checkpoint '{}': a field of {} elements runs past the end of the file", file_,
                  n);
    std::vector<T> v(n);
    take(v.data(), n * sizeof(T));
    return v;
  }
  size_t remaining() const { return end_ - at_; }

 private:
  void need(uint64_t n) const {
    BRAID_ENFORCE(n <= end_ - at_, ErrorCode::kInvalidUsage,
                  "checkpoint '{}': a field of {} bytes runs past the end of the file at byte {}",
                  file_, n, at_);
  }
  void take(void* dst, size_t n) {
    need(n);
    if (n > 0) std::memcpy(dst, bytes_.data() + at_, n);
    at_ += n;
  }
  const std::vector<char>& bytes_;
  size_t at_, end_;
  const std::string& file_;
};

void fsyncPath(const std::string& path, int flags, const char* what) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) failErrno(fmt::format("checkpoint: cannot open {} '{}'", what, path), errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) failErrno(fmt::format("checkpoint: cannot fsync {} '{}'", what, path), err);
}

/// The <step> of "ckpt-<step>.bin", or -1 for any other name.
int64_t stepOfName(const std::string& name) {
  constexpr std::string_view kPrefix = "ckpt-", kSuffix = ".bin";
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.rfind(kPrefix, 0) != 0 ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return -1;
  }
  const std::string digits =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.empty() || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  return std::stoll(digits);
}

}  // namespace

std::vector<char> encodeCheckpoint(const CheckpointState& s) {
  Writer w;
  w.putBytes(kMagic, sizeof kMagic);
  w.put<uint32_t>(kCheckpointVersion);
  w.put<uint32_t>(0);  // reserved
  w.put<uint64_t>(0);  // total length, patched below
  const CheckpointFingerprint& f = s.fingerprint;
  w.put<uint64_t>(f.layoutHash);
  w.putString(f.model);
  w.put<int32_t>(f.ranks);
  w.put<int64_t>(f.globalBatch);
  w.putString(f.optimizer);
  w.put<uint64_t>(f.seed);
  w.put<int64_t>(f.trainSamples);
  w.put<int64_t>(s.step);
  w.put<uint64_t>(s.sampler.epoch);
  w.put<uint64_t>(s.sampler.batch);
  w.putVector(s.params);
  w.putVector(s.buffers);
  w.putVector(s.optimizer);
  if (s.lossScale) {
    w.put<uint32_t>(kLossScaleTag);
    w.put<float>(s.lossScale->scale);
    w.put<int64_t>(s.lossScale->goodSteps);
    w.put<int64_t>(s.lossScale->skippedSteps);
  }
  std::vector<char>& out = w.bytes();
  const uint64_t total = out.size() + kChecksumBytes;
  std::memcpy(out.data() + sizeof kMagic + 8, &total, sizeof total);
  const uint64_t sum = fnv1a(out.data(), out.size());
  w.put<uint64_t>(sum);
  return std::move(out);
}

CheckpointState decodeCheckpoint(const std::vector<char>& bytes, const std::string& file) {
  BRAID_ENFORCE(bytes.size() >= kPrefixBytes + kChecksumBytes, ErrorCode::kInvalidUsage,
                "checkpoint '{}' is {} bytes, shorter than a checkpoint's header (truncated)", file,
                bytes.size());
  BRAID_ENFORCE(std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0, ErrorCode::kInvalidUsage,
                "checkpoint '{}' does not start with the magic BRAIDCKP (not a braid-train "
                "checkpoint)",
                file);
  uint32_t version;
  std::memcpy(&version, bytes.data() + sizeof kMagic, sizeof version);
  BRAID_ENFORCE(version == kCheckpointVersion, ErrorCode::kInvalidUsage,
                "checkpoint '{}' has format version {}, this braid-train reads version {}", file,
                version, kCheckpointVersion);
  uint64_t total;
  std::memcpy(&total, bytes.data() + sizeof kMagic + 8, sizeof total);
  BRAID_ENFORCE(total == bytes.size(), ErrorCode::kInvalidUsage,
                "checkpoint '{}' is {} bytes but its header says {} (truncated or corrupt)", file,
                bytes.size(), total);
  const size_t body = bytes.size() - kChecksumBytes;
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + body, sizeof stored);
  const uint64_t actual = fnv1a(bytes.data(), body);
  BRAID_ENFORCE(stored == actual, ErrorCode::kInvalidUsage,
                "checkpoint '{}' fails its checksum (stored {:016x}, computed {:016x}): corrupt",
                file, stored, actual);

  Reader r(bytes, kPrefixBytes, body, file);
  CheckpointState s;
  CheckpointFingerprint& f = s.fingerprint;
  f.layoutHash = r.get<uint64_t>();
  f.model = r.getString();
  f.ranks = r.get<int32_t>();
  f.globalBatch = r.get<int64_t>();
  f.optimizer = r.getString();
  f.seed = r.get<uint64_t>();
  f.trainSamples = r.get<int64_t>();
  s.step = r.get<int64_t>();
  s.sampler.epoch = r.get<uint64_t>();
  s.sampler.batch = r.get<uint64_t>();
  s.params = r.getVector<float>();
  s.buffers = r.getVector<float>();
  s.optimizer = r.getVector<char>();
  if (r.remaining() > 0) {
    const uint32_t tag = r.get<uint32_t>();
    BRAID_ENFORCE(tag == kLossScaleTag, ErrorCode::kInvalidUsage,
                  "checkpoint '{}' has an unknown section {:08x} after the optimizer state", file,
                  tag);
    CheckpointLossScale ls;
    ls.scale = r.get<float>();
    ls.goodSteps = r.get<int64_t>();
    ls.skippedSteps = r.get<int64_t>();
    s.lossScale = ls;
  }
  BRAID_ENFORCE(r.remaining() == 0 && s.step >= 0, ErrorCode::kInvalidUsage,
                "checkpoint '{}' has {} unexpected bytes after its fields (step {})", file,
                r.remaining(), s.step);
  return s;
}

void checkFingerprint(const CheckpointFingerprint& saved, const CheckpointFingerprint& expected,
                      const std::string& file) {
  std::vector<std::string> diffs;
  if (saved.model != expected.model) {
    diffs.push_back(fmt::format("model '{}' (this run: '{}')", saved.model, expected.model));
  } else if (saved.layoutHash != expected.layoutHash) {
    diffs.push_back(fmt::format("parameter layout hash {:016x} (this run: {:016x})",
                                saved.layoutHash, expected.layoutHash));
  }
  if (saved.ranks != expected.ranks) {
    diffs.push_back(fmt::format("{} rank(s) (this run: {})", saved.ranks, expected.ranks));
  }
  if (saved.globalBatch != expected.globalBatch) {
    diffs.push_back(fmt::format("global batch {} (this run: --batch {})", saved.globalBatch,
                                expected.globalBatch));
  }
  if (saved.optimizer != expected.optimizer) {
    diffs.push_back(
        fmt::format("optimizer {} (this run: {})", saved.optimizer, expected.optimizer));
  }
  if (saved.seed != expected.seed) {
    diffs.push_back(fmt::format("seed {} (this run: --seed {})", saved.seed, expected.seed));
  }
  if (saved.trainSamples != expected.trainSamples) {
    diffs.push_back(fmt::format("{} training samples (this run: {})", saved.trainSamples,
                                expected.trainSamples));
  }
  if (diffs.empty()) return;
  fail(ErrorCode::kInvalidUsage, "checkpoint '{}' does not fit this run: it was written with {}",
       file, fmt::join(diffs, ", "));
}

std::string writeCheckpoint(const std::string& dir, const CheckpointState& state, int keep) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    fail(ErrorCode::kSystemError, "checkpoint: cannot create directory '{}': {}", dir,
         ec.message());
  }
  const std::vector<char> bytes = encodeCheckpoint(state);
  std::string tmp = (fs::path(dir) / "tmp-XXXXXX").string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    failErrno(fmt::format("checkpoint: cannot create a temporary file in '{}'", dir), errno);
  ::fchmod(fd, 0644);  // mkstemp makes it 0600; a checkpoint is no secret
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      failErrno(fmt::format("checkpoint: cannot write '{}' ({} bytes)", tmp, bytes.size()), err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    failErrno(fmt::format("checkpoint: cannot fsync '{}'", tmp), err);
  }
  ::close(fd);
  const std::string final = (fs::path(dir) / fmt::format("ckpt-{}.bin", state.step)).string();
  if (::rename(tmp.c_str(), final.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    failErrno(fmt::format("checkpoint: cannot rename '{}' to '{}'", tmp, final), err);
  }
  // The rename is durable only once the directory entry is.
  fsyncPath(dir, O_RDONLY | O_DIRECTORY, "directory");

  const std::vector<std::string> all = listCheckpoints(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < all.size(); ++i) {
    fs::remove(all[i], ec);  // best effort: a stale old checkpoint is harmless
  }
  return final;
}

std::vector<std::string> listCheckpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const int64_t step = stepOfName(entry.path().filename().string());
    if (step >= 0 && entry.is_regular_file(ec)) found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a > b; });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

LoadedCheckpoint loadNewestCheckpoint(const std::string& dir, std::FILE* warn) {
  const std::vector<std::string> files = listCheckpoints(dir);
  BRAID_ENFORCE(!files.empty(), ErrorCode::kInvalidUsage,
                "--resume: no checkpoint (ckpt-<step>.bin) in --checkpoint-dir '{}'", dir);
  std::vector<std::string> refused;
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) {
      refused.push_back(fmt::format("'{}' cannot be read", file));
      continue;
    }
    try {
      decodeCheckpoint(bytes, file);
      return LoadedCheckpoint{file, std::move(bytes)};
    } catch (const Error& e) {
      refused.push_back(e.what());
      if (warn) {
        fmt::print(warn, "braid-train: skipping incomplete checkpoint: {}\n", e.what());
        std::fflush(warn);
      }
    }
  }
  fail(ErrorCode::kInvalidUsage, "--resume: no complete checkpoint in '{}': {}", dir,
       fmt::join(refused, "; "));
}

}  // namespace braid::trainer
