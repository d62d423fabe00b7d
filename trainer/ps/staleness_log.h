// --staleness-log: one JSON line per update a server received, appended as it happens.
#pragma once

#include <cstdint>
#include <string>

namespace braid::trainer::ps {

/// Appends lines {"server", "worker", "epoch", "base", "version", "staleness", "applied"} with
/// one write(2) each on an O_APPEND descriptor, so several servers can share one file. An empty
/// path: records nothing. Throws Error(kSystemError) naming the file.
class StalenessLog {
 public:
  explicit StalenessLog(const std::string& path);
  ~StalenessLog();
  StalenessLog(const StalenessLog&) = delete;
  StalenessLog& operator=(const StalenessLog&) = delete;

  /// `base`: the version the gradient was computed on; `version`: the server's version when it
  /// arrived (staleness = version - base).
  void record(int server, int worker, int64_t epoch, int64_t base, int64_t version, bool applied);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace braid::trainer::ps
