#include "transport/ofi/libfabric.h"

#include <mutex>

#include "transport/shared_library.h"

namespace braid::transport::ofi {

namespace {

constexpr const char* kName = "libfabric.so.1";

struct Loaded {
  Libfabric calls{};
  bool ok = false;
  std::string why;
};

const Loaded& load() {
  static Loaded loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    void* handle = loadKeepingSignals(kName, &loaded.why);
    if (handle == nullptr) return;
    Libfabric& c = loaded.calls;
    loaded.ok = bindSymbol(handle, kName, "fi_getinfo", &c.getinfo, &loaded.why) &&
                bindSymbol(handle, kName, "fi_freeinfo", &c.freeinfo, &loaded.why) &&
                bindSymbol(handle, kName, "fi_dupinfo", &c.dupinfo, &loaded.why) &&
                bindSymbol(handle, kName, "fi_fabric", &c.fabric, &loaded.why) &&
                bindSymbol(handle, kName, "fi_strerror", &c.strerror, &loaded.why);
    // Never closed: the providers it loads stay in use until the process ends.
  });
  return loaded;
}

}  // namespace

const Libfabric* libfabric(std::string* why) {
  const Loaded& loaded = load();
  if (!loaded.ok && why != nullptr) *why = loaded.why;
  return loaded.ok ? &loaded.calls : nullptr;
}

const char* fiError(int err) {
  const Libfabric* lib = libfabric();
  return lib != nullptr ? lib->strerror(err) : "libfabric is not loaded";
}

}  // namespace braid::transport::ofi
