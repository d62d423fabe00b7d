// Running braid-train jobs from a test: a command line with its output captured, or a launcher
// in the background whose ranks can be found (and killed) by their RANK.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace braid::testing {

struct CliResult {
  int exitCode = -1;   ///< -1: killed by a signal (coreutils timeout included)
  std::string output;  ///< stdout and stderr together
};

/// Runs `command` through the shell, bounded by coreutils timeout.
inline CliResult runCli(const std::string& command, int timeoutSeconds = 90) {
  CliResult r;
  const std::string line = "timeout " + std::to_string(timeoutSeconds) + " " + command + " 2>&1";
  FILE* pipe = ::popen(line.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, got);
  const int status = ::pclose(pipe);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string readText(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// Starts `command` (through the shell, exec'd, so the pid is the command's) with its output
/// going to `logFile`; -1 on failure.
inline pid_t spawnLogged(const std::string& command, const std::string& logFile) {
  const std::string line = "exec " + command + " >" + logFile + " 2>&1";
  const char* argv[] = {"/bin/sh", "-c", line.c_str(), nullptr};
  pid_t pid = -1;
  if (::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) {
    return -1;
  }
  return pid;
}

/// The child of `launcher` whose environment has RANK=<rank>; -1 when there is none (yet).
inline pid_t rankProcess(pid_t launcher, int rank) {
  std::ifstream children("/proc/" + std::to_string(launcher) + "/task/" + std::to_string(launcher) +
                         "/children");
  const std::string want = "RANK=" + std::to_string(rank);
  for (pid_t child; children >> child;) {
    const std::string env = readText("/proc/" + std::to_string(child) + "/environ");
    for (size_t i = 0; i < env.size();) {
      const std::string entry(env.c_str() + i);
      if (entry == want) return child;
      i += entry.size() + 1;
    }
  }
  return -1;
}

/// Waits for `pid` up to `seconds`, then kills it; its exit code, 128 + signal, or -1 when it
/// had to be killed at the deadline.
inline int waitExit(pid_t pid, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    int status = 0;
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (got < 0) return -2;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

/// Polls `ready` every 20 ms until it returns true or `seconds` pass; returns the last answer.
template <typename F>
bool waitUntil(F&& ready, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace braid::testing
