// Optional libraries (libfabric for ofi, UCX for ucx) are loaded at their backend's first use,
// not linked: linked, they load with braid into every process, and their load-time constructors
// take over signals that belong to the program. Debian's libfabric pulls in PSM's libinfinipath,
// whose handlers for SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGILL and SIGABRT call exit() inside the
// handler (a SIGTERM that lands while the process is exiting re-enters exit() and deadlocks: a
// rank of PyTorch's suite hung so; SIGINT no longer reaches Python); UCX's libucs takes SIGSEGV,
// SIGBUS, SIGILL, SIGFPE and SIGHUP (a braid process survived SIGHUP). Loaded here, every
// signal's disposition is put back as it was before the load.
#pragma once

#include <mutex>
#include <string>

namespace braid::transport {

/// dlopen(name) (RTLD_NOW | RTLD_LOCAL) with the disposition of every signal (1..SIGRTMAX) the
/// same after as before. Null with *why (dlerror's text) when it cannot be loaded.
void* loadKeepingSignals(const char* name, std::string* why);

/// dlsym(handle, symbol) into *fn; false with *why naming the library and the symbol.
template <typename Fn>
bool bindSymbol(void* handle, const char* library, const char* symbol, Fn* fn, std::string* why);

/// The untyped dlsym behind bindSymbol: null with *why when missing.
void* findSymbol(void* handle, const char* library, const char* symbol, std::string* why);

template <typename Fn>
bool bindSymbol(void* handle, const char* library, const char* symbol, Fn* fn, std::string* why) {
  *fn = reinterpret_cast<Fn>(findSymbol(handle, library, symbol, why));
  return *fn != nullptr;
}

/// A library loaded (loadKeepingSignals) at the first get() and never closed (its threads and
/// plugins live as long as the process), its functions bound into the table `Calls` by `bind`
/// (bindSymbol for each; false with *why at the first one missing). Thread-safe.
template <typename Calls>
class LoadedLibrary {
 public:
  using Bind = bool (*)(void* handle, const char* name, Calls* calls, std::string* why);
  LoadedLibrary(const char* name, Bind bind) : name_(name), bind_(bind) {}

  /// The table, or null with *why saying why the library or one of its functions is missing.
  const Calls* get(std::string* why) {
    std::call_once(once_, [this] {
      void* handle = loadKeepingSignals(name_, &why_);
      ok_ = handle != nullptr && bind_(handle, name_, &calls_, &why_);
    });
    if (!ok_ && why != nullptr) *why = why_;
    return ok_ ? &calls_ : nullptr;
  }

 private:
  const char* name_;
  Bind bind_;
  std::once_flag once_;
  Calls calls_{};
  bool ok_ = false;
  std::string why_;
};

}  // namespace braid::transport
