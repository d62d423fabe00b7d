#include "transport/ofi/libfabric.h"

#include "transport/shared_library.h"

namespace braid::transport::ofi {

namespace {

bool bindAll(void* handle, const char* name, Libfabric* c, std::string* why) {
  return bindSymbol(handle, name, "fi_getinfo", &c->getinfo, why) &&
         bindSymbol(handle, name, "fi_freeinfo", &c->freeinfo, why) &&
         bindSymbol(handle, name, "fi_dupinfo", &c->dupinfo, why) &&
         bindSymbol(handle, name, "fi_fabric", &c->fabric, why) &&
         bindSymbol(handle, name, "fi_strerror", &c->strerror, why);
}

LoadedLibrary<Libfabric>& library() {
  static LoadedLibrary<Libfabric> loaded("libfabric.so.1", bindAll);
  return loaded;
}

}  // namespace

const Libfabric* libfabric(std::string* why) { return library().get(why); }

const char* fiError(int err) {
  const Libfabric* lib = libfabric();
  return lib != nullptr ? lib->strerror(err) : "libfabric is not loaded";
}

}  // namespace braid::transport::ofi
