// The stuck-rank report (Communicator::statusReport, comm/detail/status_board.h): a rank that
// stops calling is named as behind, with its last completed collective, by the ranks that time
// out waiting for it; SIGUSR1 logs the report of every communicator of a process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "comm/bootstrap/address.h"
#include "tests/kit/communicators.h"
#include "tests/kit/processes.h"

namespace braid {
namespace {

std::string lineOf(const std::string& report, int rank) {
  std::istringstream in(report);
  std::string line;
  const std::string head = "  rank " + std::to_string(rank) + " ";
  while (std::getline(in, line)) {
    if (line.rfind(head, 0) == 0) return line;
  }
  return "";
}

TEST(StatusReport, TheRanksThatTimeOutNameTheOneThatStoppedCalling) {
  Options options;
  options.timeoutSeconds = 1.5;
  std::mutex mutex;
  std::vector<std::string> reports;
  testing::runRanks(4, options, [&](Communicator& c) {
    std::vector<float> buf(256, 1.0f);
    for (int i = 0; i < 2; ++i) {
      c.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
    }
    if (c.rank() == 2) {
      // Frozen (as far as braid can tell) past the others' timeout, then gone.
      std::this_thread::sleep_for(std::chrono::milliseconds(3000));
      return;
    }
    try {
      c.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
      ADD_FAILURE() << "rank " << c.rank() << ": no error";
    } catch (const Error&) {
      const std::string report = c.statusReport();
      std::lock_guard<std::mutex> lock(mutex);
      reports.push_back(report);
    }
  });
  ASSERT_EQ(reports.size(), 3u);
  for (const std::string& report : reports) {
    const std::string two = lineOf(report, 2);
    EXPECT_NE(two.find("not in an operation"), std::string::npos) << report;
    EXPECT_NE(two.find("last completed collective #1"), std::string::npos) << report;
    EXPECT_NE(two.find("<- behind"), std::string::npos) << report;
    for (int r : {0, 1, 3}) {
      const std::string line = lineOf(report, r);
      EXPECT_NE(line.find("allreduce #2"), std::string::npos) << report;
      EXPECT_EQ(line.find("<- behind"), std::string::npos) << report;
    }
    // The reporting rank's traffic: two one-shot all-reduces of 1 KiB came from rank 2 (what it
    // sent may include the third's, posted before the timeout).
    EXPECT_TRUE(std::regex_search(report, std::regex("bytes sent/received since creation: .*"
                                                     "rank 2 [0-9]+/2048")))
        << report;
  }
  // A rank waiting for rank 2 said so on the board before it timed out.
  bool named = false;
  for (const std::string& report : reports) {
    named = named || report.find("waiting to receive from peer rank 2") != std::string::npos;
  }
  EXPECT_TRUE(named) << reports[0];
}

// Ranks 0, 1 pose as host A and 2, 3 as host B (BRAID_HOSTNAME), as processes; rank 2 stops
// calling and is then stopped outright (SIGSTOP: its process, status server included, answers
// nothing). Rank 0's report still names it as behind, with its last collective: host B's lines
// come from rank 3's status server, after rank 2's did not answer.
TEST(StatusReport, OtherHostsLinesComeFromTheirStatusServerWhenOneProcessIsStopped) {
  using namespace braid::testing;
  Job job(4, bootstrap::findFreePort(), {{"BRAID_TIMEOUT", "3"}});
  const Body body = [](int rank, ChildIo& io) {
    Communicator comm = Communicator::fromEnvironment();
    std::vector<float> buf(256, 1.0f);
    for (int i = 0; i < 2; ++i) {
      comm.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
    }
    if (rank == 2) {
      io.signalReady();
      std::this_thread::sleep_for(std::chrono::seconds(30));  // stopped meanwhile, then killed
      return kChildCheckFailed;
    }
    try {
      comm.allReduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
      io.say("error", "none");
      return kChildCheckFailed;
    } catch (const Error&) {
    }
    const std::string report = comm.statusReport();
    const std::string two = lineOf(report, 2), three = lineOf(report, 3);
    const bool ok = two.find("not in an operation") != std::string::npos &&
                    two.find("last completed collective #1") != std::string::npos &&
                    two.find("<- behind") != std::string::npos &&
                    three.find("allreduce #2") != std::string::npos &&
                    report.find("no report from that host") == std::string::npos;
    if (!ok) std::fprintf(stderr, "rank %d's report:\n%s\n", rank, report.c_str());
    io.say("ok", ok ? "1" : "0");
    // Stay a while, as a program handling the error would: the others' reports ask this process.
    std::this_thread::sleep_for(std::chrono::seconds(4));
    return ok ? kChildOk : kChildCheckFailed;
  };
  for (int r = 0; r < 4; ++r) job.start(r, body, {{"BRAID_HOSTNAME", r < 2 ? "hostA" : "hostB"}});
  ASSERT_TRUE(job.waitReady(2, 30)) << "rank 2 never finished its two all-reduces";
  ::kill(job.pid(2), SIGSTOP);
  ASSERT_TRUE(job.waitExited(0, 30));
  ASSERT_TRUE(job.waitExited(1, 30));
  ASSERT_TRUE(job.waitExited(3, 30));
  ::kill(job.pid(2), SIGKILL);
  auto results = job.finish(10);
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(results[r].exitCode, kChildOk) << "rank " << r << ": " << results[r].describe();
  }
}

// A receive runs as a group of sends and receives (comm/detail/p2p_group.h), without a start of
// its own: while it waits the board still says so, and where; after its timeout, that it failed.
TEST(StatusReport, AWaitingReceiveIsOnTheBoard) {
  Options options;
  options.timeoutSeconds = 1.5;
  std::string during, after;
  testing::runRanks(2, options, [&](Communicator& c) {
    std::vector<float> buf(100, 0.0f);
    if (c.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(800));
      during = c.statusReport();
      std::this_thread::sleep_for(std::chrono::milliseconds(1700));
      return;
    }
    try {
      c.recv(buf.data(), buf.size(), DataType::kFloat32, 1);
      ADD_FAILURE() << "no error";
    } catch (const Error&) {
      after = c.statusReport();
    }
  });
  const std::string zero = lineOf(during, 0);
  EXPECT_NE(zero.find("in a group of sends and receives"), std::string::npos) << during;
  EXPECT_NE(zero.find("waiting to receive from peer rank 1 on channel 0 (step 1 of 1)"),
            std::string::npos)
      << during;
  const std::string failed = lineOf(after, 0);
  EXPECT_NE(failed.find("recv #0 (100 x float, peer rank 1) failed"), std::string::npos) << after;
}

TEST(StatusReport, SigusrOneLogsTheReport) {
  if (std::getenv("BRAID_TEST_SIGUSR1_CHILD") != nullptr) {
    // The child (below): one communicator, then SIGUSR1; its stderr is the parent's log file.
    Options options;
    options.timeoutSeconds = 10;
    Communicator c = Communicator::fromStore(makeInMemoryStore(), 0, 1, options);
    ::raise(SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return;
  }
  // A fresh process (exec'd, so that no thread of this one and no earlier handler is in it).
  const auto log = std::filesystem::temp_directory_path() /
                   ("braid-sigusr1-" + std::to_string(getpid()) + ".log");
  std::filesystem::remove(log);
  pid_t child = fork();
  if (child == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ::dup2(fd, 2) < 0 || ::dup2(fd, 1) < 0) _exit(3);
    ::setenv("BRAID_TEST_SIGUSR1_CHILD", "1", 1);
    ::execl("/proc/self/exe", "status_report_test",
            "--gtest_filter=StatusReport.SigusrOneLogsTheReport", static_cast<char*>(nullptr));
    _exit(4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child failed (" << status << "): " << text.str();
  EXPECT_NE(text.str().find("SIGUSR1: braid status: rank 0 of 1"), std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("rank 0 (pid"), std::string::npos) << text.str();
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace braid
