#include "transport/shared_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <csignal>
#include <mutex>
#include <vector>

namespace braid::transport {

void* loadKeepingSignals(const char* name, std::string* why) {
  // One load at a time: two loads interleaved could each put back the other's changes.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  const int last = SIGRTMAX;
  std::vector<struct sigaction> before(size_t(last) + 1);
  std::vector<bool> known(size_t(last) + 1, false);
  for (int sig = 1; sig <= last; ++sig) {
    known[size_t(sig)] = sigaction(sig, nullptr, &before[size_t(sig)]) == 0;
  }
  dlerror();
  void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  const char* error = handle == nullptr ? dlerror() : nullptr;
  for (int sig = 1; sig <= last; ++sig) {
    if (!known[size_t(sig)]) continue;  // SIGKILL, SIGSTOP, signals the C library reserves
    struct sigaction now;
    if (sigaction(sig, nullptr, &now) != 0) continue;
    // sa_handler and sa_sigaction share their storage: one comparison covers both kinds.
    const struct sigaction& was = before[size_t(sig)];
    if (now.sa_handler != was.sa_handler || now.sa_flags != was.sa_flags) {
      sigaction(sig, &was, nullptr);
    }
  }
  if (handle == nullptr && why != nullptr) {
    *why = fmt::format("{} cannot be loaded: {}", name, error ? error : "dlopen failed");
  }
  return handle;
}

void* findSymbol(void* handle, const char* library, const char* symbol, std::string* why) {
  dlerror();
  void* p = dlsym(handle, symbol);
  if (p == nullptr && why != nullptr) {
    const char* error = dlerror();
    *why = fmt::format("{} has no {}: {}", library, symbol, error ? error : "null symbol");
  }
  return p;
}

}  // namespace braid::transport
