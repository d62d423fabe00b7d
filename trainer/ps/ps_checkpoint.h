// Checkpoints of the parameter servers: each server writes its shard and the optimizer state of
// that shard (checkpoint.h's format and atomic write) to DIR/server-<rank>/ckpt-<version>.bin,
// and --resume has the servers agree on one version.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "braid/braid.hpp"
#include "trainer/ps/layout.h"
#include "trainer/train/checkpoint.h"

namespace braid::trainer::ps {

/// DIR/server-<rank>.
std::string serverCheckpointDir(const std::string& dir, int serverRank);

/// What the agreement gives every rank: the servers their state, every rank the position
/// (batches done per worker) the workers go on from.
struct ResumePoint {
  std::optional<CheckpointState> state;  ///< servers only
  int64_t position = 0;
};

/// Collective over `world`: each server finds its newest complete checkpoint; all servers take
/// the lowest of their newest versions (a server killed between two writes is one behind) and
/// load it; the workers go on from the lowest sampler position among them. A server without a
/// usable checkpoint fails every rank naming itself and the reason. `fingerprint` is what this
/// server's files must match (its shard layout included).
ResumePoint agreeOnResume(Communicator& world, const PsLayout& layout, const std::string& dir,
                          const CheckpointFingerprint& fingerprint, int64_t batchesPerEpoch);

}  // namespace braid::trainer::ps
