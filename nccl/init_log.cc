#include "init_log.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "common/config.h"
#include "common/log.h"

namespace braid::nccl {
namespace {

std::string libraryOf(const void* symbol) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "?";
  return info.dli_fname;
}

std::string envOr(const char* name, const char* otherwise) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : otherwise;
}

}  // namespace

void logInit(const CommSettings& s, const char* call) {
  if (!logEnabled(LogLevel::kInfo, LogSubsys::kInit)) return;
  logLine(LogLevel::kInfo, LogSubsys::kInit,
          fmt::format("{}: braid {} NCCL API 2.21, libnccl at {}, libbraid at {}; rank {} of {}, "
                      "CUDA device {}, {}; BRAID_TRANSPORT={} BRAID_ALGO={} BRAID_TIMEOUT={} "
                      "BRAID_CHUNK={} BRAID_CHANNELS={}",
                      call, BRAID_VERSION_STRING,
                      libraryOf(reinterpret_cast<const void*>(&logInit)),
                      libraryOf(reinterpret_cast<const void*>(&defaultTimeoutSeconds)), s.rank,
                      s.size, s.device, s.blocking ? "blocking" : "non-blocking",
                      envOr("BRAID_TRANSPORT", "auto"), envOr("BRAID_ALGO", "auto"),
                      defaultTimeoutSeconds(), envOr("BRAID_CHUNK", "default"),
                      envOr("BRAID_CHANNELS", "default")));
}

}  // namespace braid::nccl
