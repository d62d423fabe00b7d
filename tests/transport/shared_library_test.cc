// The optional transports' libraries (libfabric for ofi, libucp for ucx) are loaded at their
// backend's first use and leave the program's signal handlers as they were
// (transport/shared_library.h). Linked, they came with braid into every process: Debian's
// libfabric brought PSM's libinfinipath, whose load-time handlers for SIGTERM, SIGINT, SIGSEGV,
// SIGBUS, SIGILL and SIGABRT call exit() (a rank of PyTorch's suite that got SIGTERM while
// exiting deadlocked in it), and libucs took SIGHUP (a braid process survived it). Its own
// binary: each case needs a process in which nothing of braid has run yet.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/support/skip.h"
#include "transport/transport.h"

namespace braid::transport {
namespace {

bool loaded(const char* name) {
  void* handle = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
  if (handle != nullptr) dlclose(handle);
  return handle != nullptr;
}

void programHandler(int) {}

struct Disposition {
  void* handler;
  int flags;
};

// SA_RESTORER (the kernel's, not in glibc's headers): glibc adds it to every handler it installs,
// also when a disposition is put back to SIG_DFL; it does not change what the signal does.
constexpr int kRestorer = 0x04000000;

std::vector<Disposition> dispositions() {
  std::vector<Disposition> all(size_t(SIGRTMAX) + 1, Disposition{nullptr, 0});
  for (int sig = 1; sig <= SIGRTMAX; ++sig) {
    struct sigaction a;
    if (sigaction(sig, nullptr, &a) == 0) {
      all[size_t(sig)] = {reinterpret_cast<void*>(a.sa_handler), a.sa_flags & ~kRestorer};
    }
  }
  return all;
}

TEST(SharedLibraries, NoOptionalLibraryComesWithBraid) {
  // Linking braid's transports (this binary does) loads none of them, nor what they pull in.
  for (const char* name : {"libfabric.so.1", "libinfinipath.so.4", "libpsm2.so.2", "libucp.so.0",
                           "libucs.so.0"}) {
    EXPECT_FALSE(loaded(name)) << name << " is loaded before any transport was used";
  }
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGFPE}) {
    struct sigaction a;
    ASSERT_EQ(sigaction(sig, nullptr, &a), 0);
    // Default, or ignored as inherited (nohup): never a function nobody here installed.
    EXPECT_TRUE(a.sa_handler == SIG_DFL || a.sa_handler == SIG_IGN)
        << "signal " << sig << " (" << strsignal(sig)
        << ") has a handler nobody in this program installed";
  }
}

TEST(SharedLibraries, LoadingThemLeavesEverySignalAsItWas) {
  if (!BRAID_HAVE_OFI && !BRAID_HAVE_UCX) BRAID_SKIP_MISSING("this build has neither ofi nor ucx");
  // The program's own handlers, and defaults, before the backends are asked.
  struct sigaction mine {};
  mine.sa_handler = programHandler;
  ASSERT_EQ(sigaction(SIGTERM, &mine, nullptr), 0);
  ASSERT_EQ(sigaction(SIGINT, &mine, nullptr), 0);
  const std::vector<Disposition> before = dispositions();
  std::string why;
  if (BRAID_HAVE_OFI) {
    EXPECT_TRUE(kindAvailable(Kind::kOfi, &why) || why.find("provider") != std::string::npos)
        << why;  // libfabric loaded; whether a provider is usable depends on the machine
    EXPECT_TRUE(loaded("libfabric.so.1")) << "asking the ofi backend loads libfabric: " << why;
  }
  if (BRAID_HAVE_UCX) {
    EXPECT_TRUE(kindAvailable(Kind::kUcx, &why)) << why;
    EXPECT_TRUE(loaded("libucp.so.0"));
  }
  const std::vector<Disposition> after = dispositions();
  for (int sig = 1; sig <= SIGRTMAX; ++sig) {
    EXPECT_EQ(after[size_t(sig)].handler, before[size_t(sig)].handler)
        << "signal " << sig << " (" << strsignal(sig) << ") changed by loading a transport";
    EXPECT_EQ(after[size_t(sig)].flags, before[size_t(sig)].flags) << "signal " << sig;
  }
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
}

}  // namespace
}  // namespace braid::transport
