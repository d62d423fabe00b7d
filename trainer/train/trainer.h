// The data-parallel training loop of braid-train.
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

#include "braid/braid.hpp"
#include "trainer/train/epoch_log.h"
#include "trainer/train/options.h"

namespace braid::trainer {

/// What a run did (every rank gets the same numbers, except commWaitShare which is per rank).
struct TrainSummary {
  std::vector<EpochStats> epochs;
  int64_t steps = 0;         ///< steps taken (fp16: including skipped ones)
  int64_t skippedSteps = 0;  ///< fp16: steps skipped for inf/NaN gradients (since the start)
  double lossScale = 1;      ///< fp16: the final loss scale (fp32: 1)
};

/// Trains `options.model` on Fashion-MNIST over `comm`, collective over all its ranks:
/// rank 0's initial parameters and buffers are broadcast; each step every rank runs forward and
/// backward on its share of the global batch (split into --accum micro-batches), gradients are
/// all-reduced (avg) per bucket from the backward hook, and the optimizer steps bucket by bucket
/// as each all-reduce completes. With --precision fp16 the gradients travel as float16 and a
/// dynamic loss scale skips (on every rank together) steps whose gradients overflow. Batch-norm
/// running statistics stay per rank and are broadcast from rank 0 before each evaluation. Rank 0
/// prints progress to stderr and one line per epoch to `out` (nullptr: nothing), and writes --log
/// and --dump-params. With --checkpoint-every K rank 0 writes a checkpoint every K steps; with
/// --resume every rank restores the newest complete checkpoint (checkpoint.h) and continues from
/// its step. Throws braid::Error on bad flags (validateForWorld), missing data, I/O and
/// communication failures, and on a checkpoint that is missing, damaged or from another model, rank
/// count, batch, optimizer or seed.
TrainSummary runTraining(Communicator& comm, const TrainOptions& options, std::FILE* out);

}  // namespace braid::trainer
