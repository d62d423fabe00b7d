#include "tools/braidrun/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "braid/deadline.hpp"
#include "comm/bootstrap/address.h"
#include "comm/bootstrap/secret.h"
#include "common/error.h"
#include "tools/braidrun/line_prefixer.h"

namespace braid::braidrun {
namespace {

// After the last rank exits, output still in flight (or held by a rank's leftover children) is
// relayed for at most this long.
constexpr double kDrainSeconds = 2.0;

// One rank's stdout or stderr pipe, relayed to ours.
struct Stream {
  int fd = -1;      // read end, -1 once closed
  int target = -1;  // STDOUT_FILENO or STDERR_FILENO
  LinePrefixer lines;
  explicit Stream(std::string prefix) : lines(std::move(prefix)) {}
};

struct Rank {
  int index = 0;
  pid_t pid = -1;
  bool running = false;
  std::unique_ptr<Stream> out, err;
};

// Signals a rank's process group (what it started dies with it), or the rank alone if it left
// its group.
void signalRank(pid_t pid, int sig) {
  if (::kill(-pid, sig) != 0) ::kill(pid, sig);
}

// Writes all of `text` to our own stdout/stderr; drops it if the reader went away.
void writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 1000);
    } else {
      return;  // EPIPE and friends: nobody is reading
    }
  }
}

void note(const std::string& line) { writeAll(STDERR_FILENO, "braidrun: " + line + "\n"); }

void makePipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) failErrno("braidrun: pipe2()", errno);
}

// In the child, between fork and exec: only async-signal-safe calls plus setenv (the parent is
// single-threaded, so no lock can be held by another thread).
[[noreturn]] void execRank(const LaunchOptions& options, int rank, const std::string& port,
                           const std::string& secret, int outFd, int errFd, int execFd,
                           pid_t launcher, int cpu) {
  ::setpgid(0, 0);  // its own group, so stopping a rank stops what it started too
  if (cpu >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ::sched_setaffinity(0, sizeof one, &one);  // best effort, like mpirun's binding
  }
  // If braidrun itself is killed (SIGKILL cannot be forwarded), take the rank down with it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(128 + SIGKILL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  int devNull = ::open("/dev/null", O_RDONLY);
  if (devNull >= 0) ::dup2(devNull, STDIN_FILENO);
  if (outFd >= 0) ::dup2(outFd, STDOUT_FILENO);
  if (errFd >= 0) ::dup2(errFd, STDERR_FILENO);
  std::string r = std::to_string(rank), n = std::to_string(options.ranks);
  ::setenv("RANK", r.c_str(), 1);
  ::setenv("WORLD_SIZE", n.c_str(), 1);
  ::setenv("LOCAL_RANK", r.c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", n.c_str(), 1);
  ::setenv("GROUP_RANK", "0", 1);
  ::setenv("MASTER_ADDR", options.hostAddr.c_str(), 1);
  ::setenv("MASTER_PORT", port.c_str(), 1);
  ::setenv("BRAID_SECRET", secret.c_str(), 1);
  if (options.timeout) ::setenv("BRAID_TIMEOUT", options.timeout->c_str(), 1);
  std::vector<char*> argv;
  for (const auto& word : options.command) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  int err = errno;
  ssize_t ignored = ::write(execFd, &err, sizeof err);
  (void)ignored;
  ::_exit(127);
}

class Launcher {
 public:
  explicit Launcher(const LaunchOptions& options) : options_(options) {
    cpu_set_t usable;
    if (::sched_getaffinity(0, sizeof usable, &usable) == 0) {
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &usable)) cpus_.push_back(c);
    }
    bind_ = options.bindToCore.value_or(!cpus_.empty() &&
                                        options.ranks <= static_cast<int>(cpus_.size()));
    if (cpus_.empty()) bind_ = false;
  }
  int run();

 private:
  /// The CPU rank `index` is pinned to, or -1.
  int cpuFor(int index) const { return bind_ ? cpus_[index % cpus_.size()] : -1; }
  bool start(int rank, const std::string& port, const std::string& secret);
  void onSignal();
  void reap();
  void onExit(Rank& rank, int status);
  void stopOthers(int sig);
  std::optional<Clock::time_point> stopAt_;  // SIGTERM to the others after --settle
  void pump(Stream& stream);
  void closeStream(Stream& stream);
  bool anyRunning() const;
  bool anyOpen() const;

  const LaunchOptions& options_;
  std::vector<int> cpus_;  // CPUs braidrun may use
  bool bind_ = false;
  std::vector<Rank> ranks_;
  int signalFd_ = -1;
  int exitCode_ = 0;
  bool failed_ = false;
  int userSignals_ = 0;
  bool killScheduled_ = false;
  Clock::time_point killAt_;
};

bool Launcher::anyRunning() const {
  for (const auto& r : ranks_) {
    if (r.running) return true;
  }
  return false;
}

bool Launcher::anyOpen() const {
  for (const auto& r : ranks_) {
    if ((r.out && r.out->fd >= 0) || (r.err && r.err->fd >= 0)) return true;
  }
  return false;
}

bool Launcher::start(int index, const std::string& port, const std::string& secret) {
  Rank& rank = ranks_[index];
  rank.index = index;
  int outPipe[2] = {-1, -1}, errPipe[2] = {-1, -1}, execPipe[2];
  if (options_.prefix) {
    makePipe(outPipe);
    makePipe(errPipe);
  }
  makePipe(execPipe);
  pid_t self = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) failErrno(fmt::format("braidrun: fork() for rank {}", index), errno);
  if (pid == 0) {
    execRank(options_, index, port, secret, outPipe[1], errPipe[1], execPipe[1], self,
             cpuFor(index));
  }
  ::setpgid(pid, pid);  // also here, so a kill(-pid) right away cannot miss
  rank.pid = pid;
  rank.running = true;
  ::close(execPipe[1]);
  if (options_.prefix) {
    ::close(outPipe[1]);
    ::close(errPipe[1]);
    std::string prefix = fmt::format("[{}] ", index);
    rank.out = std::make_unique<Stream>(prefix);
    rank.out->fd = outPipe[0];
    rank.out->target = STDOUT_FILENO;
    rank.err = std::make_unique<Stream>(prefix);
    rank.err->fd = errPipe[0];
    rank.err->target = STDERR_FILENO;
  }
  // EOF means exec succeeded (the pipe is close-on-exec); an errno means it did not.
  int err = 0;
  ssize_t n;
  do {
    n = ::read(execPipe[0], &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  ::close(execPipe[0]);
  if (n != static_cast<ssize_t>(sizeof err)) return true;
  ::waitpid(pid, nullptr, 0);
  rank.running = false;
  note(fmt::format("cannot execute '{}': {}", options_.command[0], strerror(err)));
  exitCode_ = (err == EACCES || err == ENOEXEC) ? 126 : 127;
  failed_ = true;
  return false;
}

void Launcher::stopOthers(int sig) {
  for (auto& r : ranks_) {
    if (r.running) signalRank(r.pid, sig);
  }
  if (sig != SIGKILL && !killScheduled_) {
    killScheduled_ = true;
    killAt_ = Deadline::after(options_.graceSeconds).when();
  }
}

void Launcher::onExit(Rank& rank, int status) {
  rank.running = false;
  bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (ok || failed_) return;  // later deaths are the ones we caused
  failed_ = true;
  std::string what;
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    exitCode_ = 128 + sig;
    what = fmt::format("rank {} was killed by signal {} ({})", rank.index, sig, strsignal(sig));
  } else {
    exitCode_ = WEXITSTATUS(status);
    what = fmt::format("rank {} exited with code {}", rank.index, exitCode_);
  }
  if (anyRunning() && options_.settleSeconds == kSettleNever) {
    note(what + "; the other ranks go on (--settle never)");
  } else if (anyRunning()) {
    note(what + "; stopping the other ranks");
    // They usually fail by themselves at once (braid passes the failure on) and then write their
    // flight-recorder dumps: let them, for --settle, before SIGTERM.
    if (options_.settleSeconds > 0) {
      stopAt_ = Deadline::after(options_.settleSeconds).when();
    } else {
      stopOthers(SIGTERM);
    }
  } else {
    note(what);
  }
}

void Launcher::reap() {
  for (auto& r : ranks_) {
    if (!r.running) continue;
    int status = 0;
    pid_t done = ::waitpid(r.pid, &status, WNOHANG);
    if (done == r.pid) onExit(r, status);
  }
}

void Launcher::onSignal() {
  signalfd_siginfo info;
  while (::read(signalFd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) continue;  // reaped below in any case
    ++userSignals_;
    if (userSignals_ == 1) {
      // Pass it on (ranks may want to clean up); escalate after the grace period.
      for (auto& r : ranks_) {
        if (r.running) signalRank(r.pid, sig);
      }
      if (!killScheduled_) {
        killScheduled_ = true;
        killAt_ = Deadline::after(options_.graceSeconds).when();
      }
    } else {
      stopOthers(SIGKILL);
    }
  }
  reap();
}

void Launcher::closeStream(Stream& stream) {
  writeAll(stream.target, stream.lines.finish());
  ::close(stream.fd);
  stream.fd = -1;
}

void Launcher::pump(Stream& stream) {
  char buf[64 << 10];
  ssize_t n;
  do {
    n = ::read(stream.fd, buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    writeAll(stream.target, stream.lines.feed(buf, static_cast<size_t>(n)));
  } else if (n == 0 || errno != EAGAIN) {
    closeStream(stream);
  }
}

int Launcher::run() {
  // Signals arrive on a descriptor the poll loop watches; children get the mask cleared.
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&mask, sig);
  if (::sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) failErrno("braidrun: sigprocmask()", errno);
  signalFd_ = ::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signalFd_ < 0) failErrno("braidrun: signalfd()", errno);
  ::signal(SIGPIPE, SIG_IGN);

  int port = options_.port > 0 ? options_.port : bootstrap::findFreePort();
  std::string secret = bootstrap::randomSecret();
  ranks_.resize(options_.ranks);
  for (int r = 0; r < options_.ranks; ++r) {
    if (!start(r, std::to_string(port), secret)) {
      if (anyRunning()) stopOthers(SIGTERM);
      break;
    }
  }

  std::optional<Clock::time_point> drainUntil;
  while (true) {
    reap();
    bool running = anyRunning();
    if (!running && !drainUntil) drainUntil = Deadline::after(kDrainSeconds).when();
    if (!running && (!anyOpen() || Clock::now() >= *drainUntil)) break;
    if (stopAt_ && running && Clock::now() >= *stopAt_) {
      stopAt_.reset();
      stopOthers(SIGTERM);
    }
    if (killScheduled_ && running && Clock::now() >= killAt_) {
      stopOthers(SIGKILL);
      killScheduled_ = false;
    }

    std::vector<pollfd> fds{{signalFd_, POLLIN, 0}};
    std::vector<Stream*> streams;
    for (auto& r : ranks_) {
      for (Stream* s : {r.out.get(), r.err.get()}) {
        if (s != nullptr && s->fd >= 0) {
          fds.push_back({s->fd, POLLIN, 0});
          streams.push_back(s);
        }
      }
    }
    // Wake for the SIGKILL escalation and the drain limit; otherwise once a second.
    Clock::time_point wake = Deadline::after(1.0).when();
    if (killScheduled_ && killAt_ < wake) wake = killAt_;
    if (stopAt_ && *stopAt_ < wake) wake = *stopAt_;
    if (drainUntil && *drainUntil < wake) wake = *drainUntil;
    int rc = ::poll(fds.data(), fds.size(), Deadline::at(wake).millisLeft());
    if (rc < 0 && errno != EINTR) failErrno("braidrun: poll()", errno);
    if (rc <= 0) continue;
    if (fds[0].revents & POLLIN) onSignal();
    for (size_t i = 0; i < streams.size(); ++i) {
      if (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) pump(*streams[i]);
    }
  }
  for (auto& r : ranks_) {
    for (Stream* s : {r.out.get(), r.err.get()}) {
      if (s != nullptr && s->fd >= 0) closeStream(*s);
    }
  }
  ::close(signalFd_);
  return exitCode_;
}

}  // namespace

int launch(const LaunchOptions& options) {
  Launcher launcher(options);
  return launcher.run();
}

}  // namespace braid::braidrun
