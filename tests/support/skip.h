// Skipping a test with its reason, recorded for the suite's skip audit (tests/suite/skip_audit.py).
//
// Every skip says which kind it is:
//   kNoDevice: the machine lacks a device or capability the test needs (a GPU, an RDMA NIC, two
//              usable CPUs, a network interface); allowed everywhere.
//   kMissing:  a package or build part is missing; on a machine set up by tools/quickstart this is
//              a failure of the set-up, and the audit fails the suite.
// Tests never call GTEST_SKIP directly (the audit checks the sources), so no skip goes unrecorded.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace braid::testsupport {

enum class SkipKind { kNoDevice, kMissing };

/// Appends "kind<TAB>test<TAB>reason" to $BRAID_SKIP_LOG (set by CTest for every test) in one
/// write, so concurrent tests never interleave lines.
inline void recordSkip(SkipKind kind, const std::string& reason) {
  const char* path = std::getenv("BRAID_SKIP_LOG");
  if (path == nullptr || *path == '\0') return;
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? std::string(info->test_suite_name()) + "." + info->name() : "?";
  std::string line = std::string(kind == SkipKind::kNoDevice ? "device" : "missing") + "\t" + test +
                     "\t" + reason + "\n";
  int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t n = ::write(fd, line.data(), line.size());
  (void)n;
  ::close(fd);
}

}  // namespace braid::testsupport

/// Skips the running test: the machine lacks a device or capability (`reason` is a std::string
/// expression naming it).
#define BRAID_SKIP_NO_DEVICE(reason) \
  BRAID_SKIP_AS_(::braid::testsupport::SkipKind::kNoDevice, reason)
/// Skips the running test: a package or build part is missing (`reason` names the package).
#define BRAID_SKIP_MISSING(reason) BRAID_SKIP_AS_(::braid::testsupport::SkipKind::kMissing, reason)

#define BRAID_SKIP_AS_(kind, reason)                            \
  do {                                                          \
    const std::string braid_skip_reason_ = (reason);            \
    ::braid::testsupport::recordSkip(kind, braid_skip_reason_); \
    GTEST_SKIP() << braid_skip_reason_;                         \
  } while (0)
