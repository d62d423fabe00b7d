// Optional libraries (libfabric for ofi, UCX for ucx) are loaded at their backend's first use,
// not linked: linked, they load with braid into every process, and their load-time constructors
// take over signals that belong to the program. Debian's libfabric pulls in PSM's libinfinipath,
// whose handlers for SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGILL and SIGABRT call exit() inside the
// handler (a SIGTERM that lands while the process is exiting re-enters exit() and deadlocks: a
// rank of PyTorch's suite hung so; SIGINT no longer reaches Python); UCX's libucs takes SIGSEGV,
// SIGBUS, SIGILL, SIGFPE and SIGHUP (a braid process survived SIGHUP). Loaded here, every
// signal's disposition is put back as it was before the load.
#pragma once

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

}  // namespace braid::transport
