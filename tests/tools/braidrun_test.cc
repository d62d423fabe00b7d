// Runs the braidrun binary on small shell commands and checks what the ranks saw and what
// braidrun reported.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/skip.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Result {
  int code = -1;  // exit code, or 128+signal
  std::string out, err;
  double seconds = 0;
  bool timedOut = false;
};

// Runs braidrun with `args`, capturing stdout and stderr, killing it after `limit` seconds.
// When signalAfter is set, sends `sig` to braidrun that many seconds after the start.
Result runBraidrun(const std::vector<std::string>& args, double limit = 20,
                   std::optional<double> signalAfter = std::nullopt, int sig = SIGTERM) {
  int outPipe[2], errPipe[2];
  EXPECT_EQ(::pipe2(outPipe, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(errPipe, O_CLOEXEC), 0);
  auto start = Clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(outPipe[1], STDOUT_FILENO);
    ::dup2(errPipe[1], STDERR_FILENO);
    std::vector<char*> argv{const_cast<char*>(BRAIDRUN_PATH)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(BRAIDRUN_PATH, argv.data());
    ::_exit(99);
  }
  ::close(outPipe[1]);
  ::close(errPipe[1]);
  Result result;
  std::string* sinks[2] = {&result.out, &result.err};
  int fds[2] = {outPipe[0], errPipe[0]};
  bool signalled = false;
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  while (fds[0] >= 0 || fds[1] >= 0) {
    if (elapsed() > limit) {
      result.timedOut = true;
      ::kill(pid, SIGKILL);
      break;
    }
    if (signalAfter && !signalled && elapsed() >= *signalAfter) {
      ::kill(pid, sig);
      signalled = true;
    }
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    ::poll(p, 2, 10);
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i], buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        ::close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.seconds = elapsed();
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::vector<std::string> sh(const std::string& script) { return {"sh", "-c", script}; }

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Lines of `text` that start with "braidrun:".
std::vector<std::string> braidrunLines(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& line : lines(text)) {
    if (line.rfind("braidrun:", 0) == 0) out.push_back(line);
  }
  return out;
}

class BraidrunTest : public ::testing::Test {
 protected:
  void SetUp() override { ::unsetenv("BRAID_TIMEOUT"); }
};

TEST_F(BraidrunTest, SetsEnvironmentForEachRank) {
  const std::string script =
      "echo \"env $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR "
      "$MASTER_PORT $BRAID_SECRET ${BRAID_TIMEOUT-unset}\"";
  Result r = runBraidrun(concat({"-n", "3", "--timeout", "7.5"}, sh(script)));
  ASSERT_FALSE(r.timedOut);
  EXPECT_EQ(r.code, 0) << r.err;
  std::regex pattern(R"(\[(\d+)\] env (\d+) 3 (\d+) 3 0 127\.0\.0\.1 (\d+) ([0-9a-f]{32}) 7\.5)");
  std::map<int, std::string> portOf, secretOf;
  for (const auto& line : lines(r.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, pattern)) << line;
    int rank = std::stoi(m[1]);
    EXPECT_EQ(std::stoi(m[2]), rank);
    EXPECT_EQ(std::stoi(m[3]), rank);
    EXPECT_EQ(portOf.count(rank), 0u) << "rank " << rank << " printed twice";
    portOf[rank] = m[4];
    secretOf[rank] = m[5];
  }
  ASSERT_EQ(portOf.size(), 3u) << r.out;
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_EQ(portOf.count(rank), 1u);
    EXPECT_EQ(portOf[rank], portOf[0]);
    EXPECT_EQ(secretOf[rank], secretOf[0]);
  }
  int port = std::stoi(portOf[0]);
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);

  // A second job gets a fresh secret; --port/--host-addr are passed on; no --timeout, no
  // BRAID_TIMEOUT.
  Result again =
      runBraidrun(concat({"-n", "1", "--port", "23456", "--host-addr", "10.1.2.3"}, sh(script)));
  EXPECT_EQ(again.code, 0) << again.err;
  std::smatch m;
  std::string line = again.out.substr(0, again.out.find('\n'));
  ASSERT_TRUE(std::regex_match(
      line, m, std::regex(R"(\[0\] env 0 1 0 1 0 10\.1\.2\.3 23456 ([0-9a-f]{32}) unset)")))
      << again.out;
  EXPECT_NE(m[1].str(), secretOf[0]);
}

TEST_F(BraidrunTest, PrefixesWholeLinesOfStdoutAndStderr) {
  constexpr int kRanks = 4, kLines = 200;
  const std::string pad(120, 'x');
  const std::string script = "i=0; while [ $i -lt " + std::to_string(kLines) +
                             " ]; do echo \"rank $RANK line $i " + pad +
                             "\"; echo \"err $RANK $i\" >&2; i=$((i+1)); "
                             "done; printf \"tail-$RANK\"; printf \"etail-$RANK\" >&2";
  Result r = runBraidrun(concat({"-n", std::to_string(kRanks)}, sh(script)));
  ASSERT_FALSE(r.timedOut);
  EXPECT_EQ(r.code, 0) << r.err;
  std::regex outLine(R"(\[(\d+)\] rank (\d+) line (\d+) (x+))");
  std::regex errLine(R"(\[(\d+)\] err (\d+) (\d+))");
  std::vector<int> nextOut(kRanks, 0), nextErr(kRanks, 0);
  std::vector<bool> tail(kRanks, false), etail(kRanks, false);
  for (const auto& line : lines(r.out)) {
    std::smatch m;
    if (std::regex_match(line, m, std::regex(R"(\[(\d+)\] tail-(\d+))"))) {
      EXPECT_EQ(m[1], m[2]);
      tail[std::stoi(m[1])] = true;
      continue;
    }
    ASSERT_TRUE(std::regex_match(line, m, outLine)) << "mangled line: " << line;
    int rank = std::stoi(m[1]);
    ASSERT_EQ(std::stoi(m[2]), rank) << line;
    ASSERT_LT(rank, kRanks);
    EXPECT_EQ(std::stoi(m[3]), nextOut[rank]++) << line;
    EXPECT_EQ(m[4].str(), pad) << line;
  }
  for (const auto& line : lines(r.err)) {
    std::smatch m;
    if (std::regex_match(line, m, std::regex(R"(\[(\d+)\] etail-(\d+))"))) {
      EXPECT_EQ(m[1], m[2]);
      etail[std::stoi(m[1])] = true;
      continue;
    }
    ASSERT_TRUE(std::regex_match(line, m, errLine)) << "mangled line: " << line;
    int rank = std::stoi(m[1]);
    ASSERT_EQ(std::stoi(m[2]), rank) << line;
    EXPECT_EQ(std::stoi(m[3]), nextErr[rank]++) << line;
  }
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(nextOut[rank], kLines) << "rank " << rank;
    EXPECT_EQ(nextErr[rank], kLines) << "rank " << rank;
    EXPECT_TRUE(tail[rank]) << "partial stdout line of rank " << rank << " lost";
    EXPECT_TRUE(etail[rank]) << "partial stderr line of rank " << rank << " lost";
  }
}

TEST_F(BraidrunTest, NoPrefixInheritsOutput) {
  Result r = runBraidrun(concat({"-n", "2", "--no-prefix"}, sh("echo \"plain $RANK\"")));
  EXPECT_EQ(r.code, 0) << r.err;
  auto got = lines(r.out);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"plain 0", "plain 1"}));
}

TEST_F(BraidrunTest, FailingRankStopsTheOthersAndSetsExitCode) {
  Result r = runBraidrun(concat(
      {"-n", "3"}, sh("if [ $RANK = 2 ]; then sleep 0.2; exit 3; fi; sleep 30; echo survived")));
  ASSERT_FALSE(r.timedOut);
  EXPECT_EQ(r.code, 3);
  EXPECT_LT(r.seconds, 3.0) << "the other ranks were not stopped promptly";
  EXPECT_EQ(
      braidrunLines(r.err),
      std::vector<std::string>{"braidrun: rank 2 exited with code 3; stopping the other ranks"})
      << r.err;
  EXPECT_EQ(r.out.find("survived"), std::string::npos);
}

TEST_F(BraidrunTest, OtherRanksGetTheSettleTimeToEndByThemselves) {
  // Ranks 0 and 1 end 1.3 s after rank 2 failed (as braid ranks do when a peer fails, writing
  // their dumps, or as a ps async job's survivors go on): within --settle they are not stopped;
  // with --settle 0 they are at once, by default after 1 s; with --settle never not at all. The
  // exit code is the failure's in every case.
  const auto script =
      sh("if [ $RANK = 2 ]; then sleep 0.2; exit 3; fi; sleep 1.5; "
         "echo finished-$RANK");
  const struct {
    std::vector<std::string> flags;
    bool finish;
    const char* note;
  } cases[] = {{{"--settle", "2"}, true, "stopping the other ranks"},
               {{"--settle", "0"}, false, "stopping the other ranks"},
               {{}, false, "stopping the other ranks"},
               {{"--settle", "never"}, true, "the other ranks go on (--settle never)"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.flags.empty() ? "default" : c.flags[1]);
    std::vector<std::string> args = {"-n", "3"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    Result r = runBraidrun(concat(args, script));
    ASSERT_FALSE(r.timedOut);
    EXPECT_EQ(r.code, 3);
    EXPECT_EQ(r.out.find("finished-0") != std::string::npos, c.finish) << r.out;
    EXPECT_EQ(r.out.find("finished-1") != std::string::npos, c.finish) << r.out;
    EXPECT_EQ(
        braidrunLines(r.err),
        std::vector<std::string>{std::string("braidrun: rank 2 exited with code 3; ") + c.note})
        << r.err;
  }
}

TEST_F(BraidrunTest, RankIgnoringSigtermIsKilledAfterGrace) {
  Result r = runBraidrun(
      concat({"-n", "2", "--grace", "0.5"}, sh("if [ $RANK = 1 ]; then sleep 0.2; exit 5; fi; "
                                               "trap '' TERM; sleep 30")));
  ASSERT_FALSE(r.timedOut);
  EXPECT_EQ(r.code, 5);
  EXPECT_GE(r.seconds, 0.6);
  EXPECT_LT(r.seconds, 4.0);
}

TEST_F(BraidrunTest, ReportsSignalDeath) {
  Result r =
      runBraidrun(concat({"-n", "2"}, sh("if [ $RANK = 1 ]; then kill -9 $$; fi; sleep 30")));
  ASSERT_FALSE(r.timedOut);
  EXPECT_EQ(r.code, 128 + 9);
  EXPECT_LT(r.seconds, 3.0);
  EXPECT_EQ(braidrunLines(r.err),
            std::vector<std::string>{
                "braidrun: rank 1 was killed by signal 9 (Killed); stopping the other ranks"})
      << r.err;
}

TEST_F(BraidrunTest, ForwardsSigtermToRanks) {
  // Each rank cleans up on SIGTERM and exits 0, so braidrun exits 0 too.
  Result r = runBraidrun(
      concat({"-n", "2"}, sh("trap 'echo cleaned-up-$RANK; exit 0' TERM; sleep 30 & wait")), 20,
      0.5, SIGTERM);
  ASSERT_FALSE(r.timedOut);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_LT(r.seconds, 3.0);
  EXPECT_NE(r.out.find("[0] cleaned-up-0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1] cleaned-up-1"), std::string::npos) << r.out;
  // Ranks that die of the forwarded signal make braidrun exit 128+15.
  Result killed = runBraidrun(concat({"-n", "2"}, sh("sleep 30")), 20, 0.5, SIGTERM);
  EXPECT_EQ(killed.code, 128 + 15) << killed.err;
  EXPECT_LT(killed.seconds, 3.0);
}

TEST_F(BraidrunTest, CommandNotFoundExits127) {
  Result r = runBraidrun({"-n", "2", "braidrun-no-such-command", "--flag"});
  EXPECT_EQ(r.code, 127);
  EXPECT_NE(r.err.find("braidrun-no-such-command"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 3.0);
}

TEST_F(BraidrunTest, BadFlagsPrintUsageAndExit2) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"-n", "0", "true"},
                                             {"-n", "2"},
                                             {"true"},
                                             {"-n", "x", "true"},
                                             {"--bogus", "-n", "2", "true"},
                                             {"-n", "2", "--timeout", "-1", "true"}}) {
    Result r = runBraidrun(args);
    EXPECT_EQ(r.code, 2) << args[0] << " " << (args.size() > 1 ? args[1] : "");
    EXPECT_NE(r.err.find("usage: braidrun"), std::string::npos) << r.err;
  }
  // Options stop at the command: its own flags are not braidrun's.
  Result r =
      runBraidrun({"-n", "1", "sh", "-c", "printf '%s %s\\n' \"$0\" \"$1\"", "-n", "--bogus"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[0] -n --bogus\n");
}

}  // namespace

namespace braid::braidrun {
namespace {

// Ranks that fit the CPUs are pinned one per CPU (like mpirun); --bind-to none leaves them free;
// a bad value is a usage error.
TEST(BraidrunBinding, PinsOneRankPerCpuByDefaultAndNotWithNone) {
  const std::string script = "grep Cpus_allowed_list /proc/self/status | cut -f2";
  Result pinned = runBraidrun({"-n", "1", "--no-prefix", "sh", "-c", script});
  EXPECT_EQ(pinned.code, 0) << pinned.err;
  std::string cpu = pinned.out.substr(0, pinned.out.find('\n'));
  EXPECT_TRUE(!cpu.empty() && cpu.find_first_of(",-") == std::string::npos)
      << "expected a single CPU, got '" << cpu << "'";

  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  if (CPU_COUNT(&mine) < 2) BRAID_SKIP_NO_DEVICE("needs 2 usable CPUs to tell pinned from free");
  Result free = runBraidrun({"-n", "1", "--no-prefix", "--bind-to", "none", "sh", "-c", script});
  EXPECT_EQ(free.code, 0) << free.err;
  EXPECT_NE(free.out.find_first_of(",-"), std::string::npos) << free.out;

  Result bad = runBraidrun({"-n", "1", "--bind-to", "socket", "true"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--bind-to"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace braid::braidrun
