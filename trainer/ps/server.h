// A parameter server: holds one shard of the flat parameters and its optimizer state, and
// applies the workers' gradients (sync: their average per step; async: each as it arrives).
#pragma once

#include <memory>
#include <vector>

#include "trainer/ps/context.h"
#include "trainer/ps/ps_checkpoint.h"
#include "trainer/train/epoch_log.h"

namespace braid::trainer::ps {

/// What this server's checkpoints must match: the run's fingerprint with a layout hash that also
/// covers the server count and this server's slice.
CheckpointFingerprint serverFingerprint(const PsContext& ctx);

/// Serves until every worker is done or gone. `initialParams` is the whole model's initial flat
/// vector (the server keeps its shard); `resume` the agreed checkpoint; `epochLog` (server 0,
/// may be null) gets the epochs. Then --dump-params: the servers send their shards to server 0,
/// which writes the file; server 0 prints the run's staleness summary.
/// Throws Error naming the server and the cause on a server lost, every worker lost, a sync-mode
/// worker lost, a timeout (no message from any worker for BRAID_TIMEOUT) or a protocol error.
void runServer(PsContext& ctx, const std::vector<float>& initialParams, const ResumePoint& resume,
               std::unique_ptr<EpochLog> epochLog);

}  // namespace braid::trainer::ps
