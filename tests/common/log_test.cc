// Logging (common/log.h): every line carries time, host, pid, rank and subsystem; BRAID_DEBUG,
// BRAID_DEBUG_SUBSYS and BRAID_DEBUG_FILE as documented; BRAID_DEBUG=TRACE logs each collective's
// start and end. The settings are read once per process, so each case logs in a forked child
// that sets them first (the test process itself never logs).
#include "common/log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "braid/store.hpp"
#include "tests/kit/processes.h"

namespace braid {
namespace {

using testing::forkChild;
using testing::waitChild;

struct TempDir {
  TempDir() {
    char pattern[] = "/tmp/braid-log-test-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

std::string readAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string hostName() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

/// Runs `body` in a child with `env` set and its log going to <dir>/log.<pid>; returns the log.
std::string logOf(const std::vector<std::pair<std::string, std::string>>& env,
                  const std::function<void()>& body, pid_t* childPid = nullptr) {
  TempDir dir;
  const std::string pattern = dir.path + "/log.%p";
  pid_t pid = forkChild([&] {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    setenv("BRAID_DEBUG_FILE", pattern.c_str(), 1);
    body();
    return 0;
  });
  EXPECT_EQ(waitChild(pid, Deadline::after(30)), 0);
  if (childPid) *childPid = pid;
  return readAll(dir.path + "/log." + std::to_string(pid));
}

void logEach() {
  setLogRank(3);
  logAt(LogLevel::kInfo, logSubsysOf("../transport/tcp/connect.cc"), "net line {}", 1);
  logAt(LogLevel::kInfo, logSubsysOf("/src/comm/tuner.cc"), "tune line");
  logAt(LogLevel::kInfo, logSubsysOf("/src/comm/create/plan.cc"), "init line");
  logAt(LogLevel::kWarn, logSubsysOf("/src/comm/communicator.cc"), "coll warning");
}

TEST(Log, SubsystemsFollowTheSourceFolder) {
  EXPECT_EQ(logSubsysOf("../transport/shm/shm.cc"), LogSubsys::kNet);
  EXPECT_EQ(logSubsysOf("/work/main/comm/bootstrap/server.cc"), LogSubsys::kInit);
  EXPECT_EQ(logSubsysOf("../comm/init.cc"), LogSubsys::kInit);
  EXPECT_EQ(logSubsysOf("../comm/tuner.cc"), LogSubsys::kTune);
  EXPECT_EQ(logSubsysOf("../comm/engine/program_runner.cc"), LogSubsys::kColl);
  EXPECT_EQ(logSubsysOf("../trainer/train/loop.cc"), LogSubsys::kTrain);
  EXPECT_EQ(logSubsysOf("../python/src/process_group.cc"), LogSubsys::kTorch);
  EXPECT_EQ(logSubsysOf("x.cc"), LogSubsys::kOther);
  EXPECT_STREQ(logSubsysName(LogSubsys::kNet), "NET");
}

TEST(Log, LinesCarryTimeHostPidRankAndSubsystem) {
  pid_t pid = 0;
  const std::string log = logOf({{"BRAID_DEBUG", "INFO"}}, logEach, &pid);
  const std::regex line("braid INFO \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z " +
                        hostName() + ":" + std::to_string(pid) + " r3 NET net line 1\n");
  EXPECT_TRUE(std::regex_search(log, line)) << log;
  EXPECT_NE(log.find(" r3 TUNE tune line"), std::string::npos) << log;
  EXPECT_NE(log.find(" r3 INIT init line"), std::string::npos) << log;
  EXPECT_NE(log.find("braid WARN "), std::string::npos) << log;
}

TEST(Log, LevelFilters) {
  const std::string log = logOf({{"BRAID_DEBUG", "WARN"}}, logEach);
  EXPECT_EQ(log.find("line"), std::string::npos) << "INFO lines at WARN: " << log;
  EXPECT_NE(log.find("COLL coll warning"), std::string::npos) << log;
}

TEST(Log, SubsystemFilterIncludesOrExcludes) {
  std::string log = logOf({{"BRAID_DEBUG", "INFO"}, {"BRAID_DEBUG_SUBSYS", "TUNE,init"}}, logEach);
  EXPECT_EQ(log.find("NET"), std::string::npos) << log;
  EXPECT_EQ(log.find("COLL"), std::string::npos) << log;
  EXPECT_NE(log.find("TUNE tune line"), std::string::npos) << log;
  EXPECT_NE(log.find("INIT init line"), std::string::npos) << log;
  log = logOf({{"BRAID_DEBUG", "INFO"}, {"BRAID_DEBUG_SUBSYS", "^NET"}}, logEach);
  EXPECT_EQ(log.find("NET"), std::string::npos) << log;
  EXPECT_NE(log.find("COLL coll warning"), std::string::npos) << log;
  EXPECT_NE(log.find("TUNE tune line"), std::string::npos) << log;
}

TEST(Log, AnUnopenableFileFallsBackToStderrSayingSo) {
  TempDir dir;
  const std::string err = dir.path + "/stderr";
  pid_t pid = forkChild([&] {
    int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDERR_FILENO);
    setenv("BRAID_DEBUG", "INFO", 1);
    setenv("BRAID_DEBUG_FILE", "/nonexistent-dir/braid.%h.%p", 1);
    logEach();
    return 0;
  });
  ASSERT_EQ(waitChild(pid, Deadline::after(30)), 0);
  const std::string text = readAll(err);
  EXPECT_NE(text.find("BRAID_DEBUG_FILE: cannot open '/nonexistent-dir/braid." + hostName() + "." +
                      std::to_string(pid) + "'"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("NET net line 1"), std::string::npos) << text;
}

TEST(Log, TraceLogsEveryCollectivesStartAndEndWithItsNumber) {
  const std::string log = logOf({{"BRAID_DEBUG", "TRACE"}, {"BRAID_DEBUG_SUBSYS", "COLL"}}, [] {
    Communicator comm = Communicator::fromStore(makeInMemoryStore(), 0, 1);
    float x[3] = {1, 2, 3};
    comm.allReduce(x, x, 3, DataType::kFloat32, RedOp::kSum);
    comm.allReduce(x, x, 3, DataType::kFloat32, RedOp::kSum);
  });
  EXPECT_NE(log.find("r0 COLL rank 0: allreduce #0 (3 x float, sum"), std::string::npos) << log;
  EXPECT_NE(log.find("allreduce #1 (3 x float, sum"), std::string::npos) << log;
  EXPECT_NE(log.find(") start\n"), std::string::npos) << log;
  EXPECT_NE(log.find(") end\n"), std::string::npos) << log;
  EXPECT_EQ(log.find(" INIT "), std::string::npos) << "filtered out: " << log;
}

}  // namespace
}  // namespace braid
