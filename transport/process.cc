#include "transport/process.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <functional>
#include <string>

namespace braid::transport {

uint64_t hostId() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::string text = name;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(boot, id);
  text += "/" + id;
  return std::hash<std::string>{}(text);
}

uint64_t pidNamespace() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

bool processGone(uint64_t pid, uint64_t peerPidNamespace) {
  if (pid == 0) return true;
  const uint64_t own = pidNamespace();
  if (own == 0 || peerPidNamespace != own) return false;
  const bool signalable = kill(static_cast<pid_t>(pid), 0) == 0;
  if (!signalable && errno == ESRCH) return true;
  // A killed child stays a zombie until its parent reaps it; that counts as gone, and so does
  // 'X' (dead, being reaped).
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text;
  if (!std::getline(stat, text)) {
    // Exited between kill() and the open, when /proc itself is readable; else (no /proc, or
    // another user's process hidden by hidepid) we cannot tell.
    struct stat self {};
    return signalable && ::stat("/proc/self/stat", &self) == 0;
  }
  size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return false;
  char state = text[paren + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace braid::transport
