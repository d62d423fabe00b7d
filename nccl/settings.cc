#include "settings.h"

#include <fmt/format.h>

#include <cstddef>

#include "errors.h"

namespace braid::nccl {
namespace {
constexpr unsigned kConfigMagic = 0xcafebeef;  // NCCL_CONFIG_INITIALIZER's
}

CommSettings settingsFrom(const ncclConfig_t* config, const char* call) {
  CommSettings settings;
  if (config == nullptr) return settings;
  const size_t size = config->size;
  auto has = [&](size_t offset, size_t bytes) { return offset + bytes <= size; };
  if (!has(offsetof(ncclConfig_t, magic), sizeof config->magic) || config->magic != kConfigMagic) {
    argumentError(fmt::format("{}: config was not initialised with NCCL_CONFIG_INITIALIZER "
                              "(size {}, magic 0x{:x})",
                              call, size, has(offsetof(ncclConfig_t, magic), 4) ? config->magic : 0));
  }
  if (has(offsetof(ncclConfig_t, blocking), sizeof config->blocking) &&
      config->blocking != NCCL_CONFIG_UNDEF_INT) {
    settings.blocking = config->blocking != 0;
  }
  return settings;
}

}  // namespace braid::nccl
