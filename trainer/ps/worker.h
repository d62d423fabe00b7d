// A parameter-server worker: pulls the parameters, computes gradients on its data shard (the
// samples a DDP rank with the same index would take) and pushes them to the servers.
#pragma once

#include "trainer/data/dataset.h"
#include "trainer/nn/models.h"
#include "trainer/ps/context.h"

namespace braid::trainer::ps {

/// Trains until --epochs / --max-steps (counted in this worker's batches), then tells every
/// server it is done. At each epoch's end it pulls, evaluates its strided share of `test` and
/// reports to server 0. Throws Error naming the server when a server's link fails (after telling
/// the other servers, so they end too) or a server reports another server lost.
void runWorker(PsContext& ctx, Model& model, const Dataset& train, const Dataset& test);

}  // namespace braid::trainer::ps
