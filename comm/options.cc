// Options plus their BRAID_* environment overrides, checked.
#include "comm/detail/state.h"
#include "common/env.h"
#include "common/error.h"

namespace braid {

ResolvedOptions resolveOptions(const Options& o) {
  ResolvedOptions r;
  r.timeoutSeconds = o.timeoutSeconds > 0 ? o.timeoutSeconds : defaultTimeoutSeconds();
  r.transport = o.transport.empty() ? envString("BRAID_TRANSPORT").value_or("") : o.transport;
  r.transport = transport::checkForcedKind(r.transport);  // "" = the best kind per peer
  r.algorithm = o.algorithm;
  if (r.algorithm == Algorithm::kAuto) {
    if (auto name = envString("BRAID_ALGO")) {
      BRAID_ENFORCE(
          parseAlgorithm(*name, &r.algorithm), ErrorCode::kInvalidUsage,
          "unknown algorithm BRAID_ALGO='{}': choose auto, ring, oneshot, chain, tree, hier or singlecopy",
          *name);
    }
  }
  const std::optional<size_t> chunkEnv = envBytes("BRAID_CHUNK");
  r.chunkSet = o.chunkBytes != 0 || chunkEnv.has_value();
  size_t chunk = o.chunkBytes ? o.chunkBytes : chunkEnv.value_or(comm::defaultSlotBytes(1));
  BRAID_ENFORCE(chunk >= 64 && chunk <= (64u << 20) && chunk % 8 == 0, ErrorCode::kInvalidUsage,
                "chunk size {} (BRAID_CHUNK) must be a multiple of 8 between 64 B and 64 MiB",
                chunk);
  r.slotBytes = chunk;
  r.slots = static_cast<int>(envInt("BRAID_SLOTS", 8));
  BRAID_ENFORCE(r.slots >= 2 && r.slots <= 64, ErrorCode::kInvalidUsage,
                "BRAID_SLOTS={} must be between 2 and 64", r.slots);
  r.streamBytes = envBytes("BRAID_STREAM_BYTES").value_or(r.streamBytes);
  const std::optional<int64_t> channelsEnv = envInt("BRAID_CHANNELS");
  r.channelsSet = o.channels > 0 || channelsEnv.has_value();
  r.channels = o.channels > 0 ? o.channels
                              : static_cast<int>(channelsEnv.value_or(comm::defaultChannels(1)));
  BRAID_ENFORCE(r.channels >= 1 && r.channels <= 16, ErrorCode::kInvalidUsage,
                "channel count {} (BRAID_CHANNELS) must be between 1 and 16", r.channels);
  r.hostName = o.hostName;
  const int64_t flightOps = envInt("BRAID_FLIGHT_OPS", 2000);
  BRAID_ENFORCE(flightOps >= 0 && flightOps <= 10000000, ErrorCode::kInvalidUsage,
                "BRAID_FLIGHT_OPS={} must be between 0 and 10000000", flightOps);
  r.flightOps = static_cast<size_t>(flightOps);
  r.dumpDir = envString("BRAID_DUMP_DIR").value_or("");
  r.statusBoard = envInt("BRAID_STATUS_BOARD", 1) != 0;
  r.singleCopy = envInt("BRAID_SINGLE_COPY", 1) != 0;
  r.deterministic = o.deterministic || envInt("BRAID_DETERMINISTIC", 0) != 0;
  r.singleCopyBytes = envBytes("BRAID_SINGLE_COPY_BYTES").value_or(r.singleCopyBytes);
  if (auto mapped = envBytes("BRAID_MAPPED_COPY_BYTES")) {
    r.mappedCopyBytes = *mapped;
    r.threadMappedCopyBytes = *mapped;
  }
  r.pickChunk = envInt("BRAID_PICK_CHUNK", 0) != 0;
  return r;
}

}  // namespace braid
