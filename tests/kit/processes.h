// Ranks as processes, the test kit's one fork harness. forkChild/waitChild: one child running a
// function, waited for with a deadline and killed past it. Job: a group of rank processes with
// the launcher's environment (RANK, WORLD_SIZE, MASTER_ADDR/PORT, BRAID_SECRET); each child runs
// a body and _exit()s with its code (never returning into gtest), reports short "key=value"
// lines through a pipe, and can signal readiness (for kill -9 / SIGSTOP at a chosen moment); the
// parent waits with a bound and kills leftovers.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "braid/deadline.hpp"
#include "common/error.h"

namespace braid::testing {

/// waitChild's result for a child killed at the deadline.
constexpr int kKilledAtDeadline = -1000;

/// Forks a child that runs fn() and _exit()s with its result (0 ok); an exception is printed and
/// exits 2. The child never returns into the caller (gtest).
inline pid_t forkChild(const std::function<int()>& fn) {
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int code = 3;
    try {
      code = fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child %d: %s\n", ::getpid(), e.what());
      code = 2;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(code);
  }
  return pid;
}

/// Waits for a child until `deadline`, then kills it (SIGCONT first, for a stopped one); returns
/// its exit code, -signal, or kKilledAtDeadline.
inline int waitChild(pid_t pid, Deadline deadline) {
  int status = 0;
  for (;;) {
    pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) break;
    if (got < 0) return -1;
    if (deadline.expired()) {
      ::kill(pid, SIGCONT);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return kKilledAtDeadline;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

/// Exit codes of a rank child.
constexpr int kChildOk = 0;
constexpr int kChildWrongData = 1;    ///< an element differed from the reference
constexpr int kChildUnexpected = 2;   ///< an exception that the body did not expect
constexpr int kChildCheckFailed = 3;  ///< an expectation inside the child failed

/// Seconds on CLOCK_MONOTONIC, comparable across the processes of this machine.
inline double monoNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

/// The value of the last "key=value" line of a report ("" when absent).
inline std::string reportValue(const std::string& report, const std::string& key) {
  std::string found;
  size_t pos = 0;
  while (pos < report.size()) {
    size_t end = report.find('\n', pos);
    if (end == std::string::npos) end = report.size();
    std::string line = report.substr(pos, end - pos);
    if (line.compare(0, key.size() + 1, key + "=") == 0) found = line.substr(key.size() + 1);
    pos = end + 1;
  }
  return found;
}

/// What a rank child can do besides computing: report lines and signal readiness to the parent.
class ChildIo {
 public:
  ChildIo(int reportFd, int signalFd) : reportFd_(reportFd), signalFd_(signalFd) {}
  /// Appends "key=value\n" to the report the parent reads (kept short: the pipe is not drained
  /// until the child exits).
  void say(const std::string& key, const std::string& value) {
    std::string line = key + "=" + value;
    for (char& c : line)
      if (c == '\n') c = ' ';
    line += '\n';
    if (report_.size() + line.size() < 16000) report_ += line;
  }
  /// The last value reported under `key` ("" when none).
  std::string said(const std::string& key) const { return reportValue(report_, key); }
  void sayTime(const std::string& key) { say(key, std::to_string(monoNow())); }
  /// Tells the parent "I am ready" (one byte on the signal pipe).
  void signalReady() {
    char c = 'r';
    (void)!::write(signalFd_, &c, 1);
  }
  void flush() {
    size_t off = 0;
    while (off < report_.size()) {
      ssize_t w = ::write(reportFd_, report_.data() + off, report_.size() - off);
      if (w <= 0) break;
      off += size_t(w);
    }
  }

 private:
  int reportFd_;
  int signalFd_;
  std::string report_;
};

/// A finished child: exit code (or -signal), whether the parent had to kill it, its report.
struct ChildResult {
  int exitCode = -1;
  bool killed = false;
  std::string report;
  /// The value of "key=" in the report ("" when absent; the last one wins).
  std::string get(const std::string& key) const { return reportValue(report, key); }
  double getDouble(const std::string& key) const {
    std::string v = get(key);
    return v.empty() ? -1.0 : std::atof(v.c_str());
  }
  std::string describe() const {
    return "exit " + std::to_string(exitCode) + (killed ? " (killed by the parent)" : "") + "\n" +
           report;
  }
};

using Env = std::map<std::string, std::string>;
using Body = std::function<int(int rank, ChildIo& io)>;

/// A group of rank processes sharing one store port.
class Job {
 public:
  /// `env` is applied in every child on top of RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
  /// BRAID_SECRET (an entry with an empty value unsets the variable).
  Job(int n, int port, Env env) : n_(n), port_(port), env_(std::move(env)), kids_(n) {}
  ~Job() { killAll(); }

  /// Forks rank `rank`; `extra` overrides the job's environment for this rank only.
  void start(int rank, const Body& body, const Env& extra = {}) {
    Kid& k = kids_[rank];
    int rep[2], sig[2];
    if (::pipe(rep) != 0 || ::pipe(sig) != 0) std::abort();
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(rep[0]);
      ::close(sig[0]);
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(n_).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port_).c_str(), 1);
      ::setenv("BRAID_SECRET", "faults-test-secret", 1);
      Env all = env_;
      for (auto& [key, value] : extra) all[key] = value;
      for (auto& [key, value] : all) {
        if (value.empty())
          ::unsetenv(key.c_str());
        else
          ::setenv(key.c_str(), value.c_str(), 1);
      }
      ChildIo io(rep[1], sig[1]);
      int code = kChildUnexpected;
      try {
        code = body(rank, io);
      } catch (const Error& e) {
        io.say("unexpected", std::string(errorCodeName(e.code())) + ": " + e.what());
      } catch (const std::exception& e) {
        io.say("unexpected", e.what());
      }
      io.flush();
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(code);
    }
    ::close(rep[1]);
    ::close(sig[1]);
    k.pid = pid;
    k.reportFd = rep[0];
    k.signalFd = sig[0];
    ::fcntl(k.reportFd, F_SETFL, O_NONBLOCK);
  }

  /// Forks every rank with the same body.
  void startAll(const Body& body) {
    for (int r = 0; r < n_; ++r) start(r, body);
  }

  pid_t pid(int rank) const { return kids_[rank].pid; }

  /// Waits up to `seconds` for rank's readiness byte; false on timeout or if it exited first.
  bool waitReady(int rank, double seconds) {
    pollfd p{kids_[rank].signalFd, POLLIN, 0};
    if (::poll(&p, 1, int(seconds * 1000)) <= 0) return false;
    char c;
    return ::read(kids_[rank].signalFd, &c, 1) == 1;
  }

  /// Waits up to `seconds` for rank's process to exit; true when it did.
  bool waitExited(int rank, double seconds) {
    const double end = monoNow() + seconds;
    for (;;) {
      if (!reap(kids_[rank])) return true;
      if (monoNow() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  /// Waits for every started child up to `seconds` in all, kills the rest; returns their results.
  std::vector<ChildResult> finish(double seconds) {
    const double end = monoNow() + seconds;
    std::vector<ChildResult> out(n_);
    for (;;) {
      bool running = false;
      for (int r = 0; r < n_; ++r) running = reap(kids_[r]) || running;
      if (!running || monoNow() > end) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (int r = 0; r < n_; ++r) {
      Kid& k = kids_[r];
      if (k.pid > 0 && !k.done) {
        ::kill(k.pid, SIGCONT);
        ::kill(k.pid, SIGKILL);
        int status = 0;
        ::waitpid(k.pid, &status, 0);
        k.done = true;
        k.killed = true;
        k.exitCode = -SIGKILL;
      }
      drain(k);
      out[r].exitCode = k.exitCode;
      out[r].killed = k.killed;
      out[r].report = k.report;
      closeFds(k);
      // BRAID_FAULTS_VERBOSE=1 shows what every rank reported (messages, timings).
      if (std::getenv("BRAID_FAULTS_VERBOSE"))
        std::fprintf(stderr, "--- rank %d: %s", r, out[r].describe().c_str());
    }
    return out;
  }

 private:
  struct Kid {
    pid_t pid = -1;
    int reportFd = -1;
    int signalFd = -1;
    bool done = false;
    bool killed = false;
    int exitCode = -1;
    std::string report;
  };

  // Collects an exited child; true while it is still running.
  static bool reap(Kid& k) {
    drain(k);
    if (k.pid <= 0 || k.done) return false;
    int status = 0;
    if (::waitpid(k.pid, &status, WNOHANG) != k.pid) return true;
    k.done = true;
    k.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    drain(k);
    return false;
  }
  static void drain(Kid& k) {
    if (k.reportFd < 0) return;
    char buf[4096];
    for (;;) {
      ssize_t got = ::read(k.reportFd, buf, sizeof buf);
      if (got <= 0) break;
      k.report.append(buf, size_t(got));
    }
  }
  static void closeFds(Kid& k) {
    if (k.reportFd >= 0) ::close(k.reportFd);
    if (k.signalFd >= 0) ::close(k.signalFd);
    k.reportFd = k.signalFd = -1;
  }
  void killAll() {
    for (Kid& k : kids_) {
      if (k.pid > 0 && !k.done) {
        ::kill(k.pid, SIGCONT);
        ::kill(k.pid, SIGKILL);
        int status = 0;
        ::waitpid(k.pid, &status, 0);
        k.done = true;
      }
      closeFds(k);
    }
  }

  int n_;
  int port_;
  Env env_;
  std::vector<Kid> kids_;
};

}  // namespace braid::testing
