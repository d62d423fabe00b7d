// Shared host allocations and peers' mappings of them (shared_buffer.h).
#include "transport/shared_buffer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "common/error.h"
#include "transport/peer_memory.h"

namespace braid::transport {
namespace {

struct Allocation {
  size_t bytes;
  int fd;
  uint64_t serial;
};

// Every live allocation of this process by its first byte.
struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> live;
  uint64_t nextSerial = 1;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: frees may come from static destructors
  return *r;
}

size_t pageSize() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

// The memory file's name: the owner's token and the allocation's serial.
std::string fileName(uint64_t token, uint64_t serial) {
  return fmt::format("braid-{:x}-{}", token, serial);
}

// What /proc/<pid>/fd/<fd> points at, or "".
std::string linkTarget(const std::string& path) {
  char buf[512];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

void* allocateShared(size_t bytes) {
  const size_t page = pageSize();
  const size_t rounded = (std::max<size_t>(bytes, 1) + page - 1) / page * page;
  Registry& reg = registry();
  uint64_t serial;
  {
    std::lock_guard<std::mutex> lock(reg.mutex);
    serial = reg.nextSerial++;
  }
  const std::string name = fileName(processToken(), serial);
  const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) {
    fail(ErrorCode::kSystemError, "braid memAlloc of {} bytes: memfd_create failed: {}", bytes,
         std::strerror(errno));
  }
  if (::ftruncate(fd, static_cast<off_t>(rounded)) != 0) {
    const int err = errno;
    ::close(fd);
    fail(ErrorCode::kSystemError, "braid memAlloc of {} bytes: ftruncate to {} failed: {}", bytes,
         rounded, std::strerror(err));
  }
  void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    fail(ErrorCode::kSystemError, "braid memAlloc of {} bytes: mmap failed: {}", bytes,
         std::strerror(err));
  }
  std::lock_guard<std::mutex> lock(reg.mutex);
  reg.live[reinterpret_cast<uintptr_t>(p)] = {rounded, fd, serial};
  return p;
}

void freeShared(void* p) {
  Registry& reg = registry();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(reg.mutex);
    auto it = reg.live.find(reinterpret_cast<uintptr_t>(p));
    BRAID_ENFORCE(it != reg.live.end(), ErrorCode::kInvalidUsage,
                  "braid memFree({}): not the start of a braid memAlloc allocation of this "
                  "process (freed twice, or from another allocator?)",
                  p);
    a = it->second;
    reg.live.erase(it);
  }
  ::munmap(p, a.bytes);
  ::close(a.fd);
}

bool findShared(const void* p, size_t bytes, SharedRange* out) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto it = reg.live.upper_bound(at);
  if (it == reg.live.begin()) return false;
  --it;
  const uintptr_t base = it->first;
  const Allocation& a = it->second;
  if (at - base > a.bytes || bytes > a.bytes - (at - base)) return false;
  *out = {a.fd, a.serial, at - base, a.bytes};
  return true;
}

SharedMappings::~SharedMappings() {
  for (const Entry& e : entries_) ::munmap(e.base, e.bytes);
}

char* SharedMappings::map(int64_t pid, uint64_t token, const SharedRange& range,
                          std::string* why) {
  ++uses_;
  for (Entry& e : entries_) {
    if (e.pid == pid && e.token == token && e.serial == range.serial && e.bytes == range.bytes) {
      e.lastUse = uses_;
      return e.base + range.offset;
    }
  }
  if (range.fd < 0 || range.offset > range.bytes) {
    *why = "not a braid memAlloc buffer";
    return nullptr;
  }
  // Only the file that allocation was given, whatever the descriptor number holds now.
  const std::string path = fmt::format("/proc/{}/fd/{}", pid, range.fd);
  const std::string want = "/memfd:" + fileName(token, range.serial) + " (deleted)";
  if (const std::string seen = linkTarget(path); seen != want) {
    *why = fmt::format("{} is '{}', not its allocation {}", path, seen, range.serial);
    return nullptr;
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    *why = fmt::format("cannot open {}: {}", path, std::strerror(errno));
    return nullptr;
  }
  struct stat st {};
  const bool same = linkTarget(path) == want && ::fstat(fd, &st) == 0 &&
                    static_cast<uint64_t>(st.st_size) >= range.bytes;
  if (!same) {
    ::close(fd);
    *why = fmt::format("{} changed while it was opened, or is smaller than {} bytes", path,
                       range.bytes);
    return nullptr;
  }
  // Populated now: the first op over it would otherwise take a page fault per page.
  void* p = ::mmap(nullptr, range.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    *why = fmt::format("mmap of {} bytes of {} failed: {}", range.bytes, path, std::strerror(err));
    return nullptr;
  }
  if (entries_.size() >= kMaxMappings) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const Entry& a, const Entry& b) { return a.lastUse < b.lastUse; });
    ::munmap(oldest->base, oldest->bytes);
    entries_.erase(oldest);
  }
  entries_.push_back({pid, token, range.serial, static_cast<char*>(p), range.bytes, uses_});
  return static_cast<char*>(p) + range.offset;
}

}  // namespace braid::transport
