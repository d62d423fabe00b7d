#include "trainer/data/file_bytes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>

#include "common/error.h"

namespace braid::trainer {
namespace {

/// Closes a file descriptor on every exit path.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { ::close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

std::vector<uint8_t> readRaw(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) fail(ErrorCode::kInvalidUsage, "{}: no such file", path);
    failErrno(fmt::format("{}: cannot open for reading", path), err);
  }
  FdCloser closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) failErrno(fmt::format("{}: fstat", path), errno);
  BRAID_ENFORCE(S_ISREG(st.st_mode), ErrorCode::kInvalidUsage, "{}: expected a regular file", path);
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t got = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (got < 0) {
      if (errno == EINTR) continue;
      failErrno(fmt::format("{}: read at byte {} of {}", path, done, bytes.size()), errno);
    }
    if (got == 0) break;  // the file shrank while we read it
    done += static_cast<size_t>(got);
  }
  bytes.resize(done);
  return bytes;
}

bool hasGzipMagic(const uint8_t* data, size_t size) {
  return size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
}

/// Inflates every gzip member in `in`; anything after the last member that is not another member
/// is refused, as are corrupt and truncated streams.
std::vector<uint8_t> gunzip(const std::vector<uint8_t>& in, const std::string& path) {
  std::vector<uint8_t> out;
  // The trailer's ISIZE (size mod 2^32 of the last member) is a good first guess for the size.
  // In a damaged file it is garbage, so it is capped by deflate's best ratio (1032:1).
  if (in.size() >= 18) {
    const uint8_t* t = in.data() + in.size() - 4;
    const uint64_t isize =
        uint32_t(t[0]) | uint32_t(t[1]) << 8 | uint32_t(t[2]) << 16 | uint32_t(t[3]) << 24;
    out.reserve(std::min<uint64_t>(isize, uint64_t{1032} * in.size()));
  }
  z_stream zs{};
  BRAID_ENFORCE(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK, ErrorCode::kSystemError,
                "{}: zlib inflateInit2 failed", path);
  struct Ender {
    z_stream* zs;
    ~Ender() { inflateEnd(zs); }
  } ender{&zs};

  size_t pos = 0;
  constexpr size_t kChunk = size_t{1} << 20;
  while (true) {
    const size_t inLeft = in.size() - pos;
    zs.next_in = const_cast<Bytef*>(in.data() + pos);
    zs.avail_in = static_cast<uInt>(std::min<size_t>(inLeft, 1u << 30));
    if (out.capacity() - out.size() < kChunk / 4) {
      out.reserve(out.size() + std::max(kChunk, out.size() / 2));  // geometric: few copies
    }
    const size_t before = out.size();
    out.resize(out.capacity());
    zs.next_out = out.data() + before;
    zs.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - before, 1u << 30));
    const uInt availIn = zs.avail_in;
    const uInt availOut = zs.avail_out;
    int rc = inflate(&zs, Z_NO_FLUSH);
    pos += availIn - zs.avail_in;
    out.resize(before + (availOut - zs.avail_out));
    if (rc == Z_STREAM_END) {
      if (pos == in.size()) break;
      if (!hasGzipMagic(in.data() + pos, in.size() - pos)) {
        fail(ErrorCode::kInvalidUsage,
             "{}: expected end of file or another gzip member after the gzip stream, found {} "
             "more bytes",
             path, in.size() - pos);
      }
      inflateReset(&zs);
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && pos == in.size()) {
      fail(ErrorCode::kInvalidUsage,
           "{}: gzip stream truncated: ended after {} compressed bytes ({} inflated) before "
           "its trailer",
           path, in.size(), out.size());
    }
    // Input and output room were both offered, so no progress here means a zlib bug.
    BRAID_ENFORCE(rc != Z_BUF_ERROR, ErrorCode::kInternal,
                  "{}: inflate made no progress at byte {}", path, pos);
    if (rc == Z_MEM_ERROR) fail(ErrorCode::kSystemError, "{}: out of memory inflating", path);
    fail(ErrorCode::kInvalidUsage, "{}: corrupt gzip data at compressed byte {}: {}", path, pos,
         zs.msg ? zs.msg : "unknown zlib error");
  }
  out.shrink_to_fit();
  return out;
}

}  // namespace

FileBytes readFileBytes(const std::string& path) {
  FileBytes file;
  file.bytes = readRaw(path);
  if (hasGzipMagic(file.bytes.data(), file.bytes.size())) {
    file.bytes = gunzip(file.bytes, path);
    file.gzip = true;
  }
  return file;
}

}  // namespace braid::trainer
