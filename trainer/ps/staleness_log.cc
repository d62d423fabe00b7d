#include "trainer/ps/staleness_log.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace braid::trainer::ps {

StalenessLog::StalenessLog(const std::string& path) : path_(path) {
  if (path_.empty()) return;
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  BRAID_ENFORCE(fd_ >= 0, ErrorCode::kSystemError, "cannot open --staleness-log '{}': {}", path_,
                std::strerror(errno));
}

StalenessLog::~StalenessLog() {
  if (fd_ >= 0) ::close(fd_);
}

void StalenessLog::record(int server, int worker, int64_t epoch, int64_t base, int64_t version,
                          bool applied) {
  if (fd_ < 0) return;
  const std::string line = fmt::format(
      "{{\"server\":{},\"worker\":{},\"epoch\":{},\"base\":{},\"version\":{},\"staleness\":{},"
      "\"applied\":{}}}\n",
      server, worker, epoch + 1, base, version, version - base, applied ? "true" : "false");
  const ssize_t n = ::write(fd_, line.data(), line.size());
  BRAID_ENFORCE(n == static_cast<ssize_t>(line.size()), ErrorCode::kSystemError,
                "cannot append to --staleness-log '{}': {}", path_, std::strerror(errno));
}

}  // namespace braid::trainer::ps
