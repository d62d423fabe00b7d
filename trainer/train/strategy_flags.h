// braid-train's --strategy (ddp, ps, pipeline) and the flags of each strategy: their
// definitions, their checks, and the refusal of one strategy's flags with another.
#pragma once

#include <CLI/CLI.hpp>

#include "trainer/train/options.h"

namespace braid::trainer {

/// Adds --strategy, ps's flags (--ps, --mode, --max-staleness, --staleness-log) and pipeline's
/// (--stages, --micro-batches, --schedule, --partition) to `app`, filling `o`.
void addStrategyFlags(CLI::App& app, TrainOptions& o);

/// After `app` parsed: --strategy is known, the chosen strategy's flags are valid and it
/// supports the other flags given, and no flag of another strategy was given. Throws
/// Error(kInvalidUsage).
void validateStrategyFlags(const CLI::App& app, const TrainOptions& o);

/// --strategy pipeline's rank-count checks: --stages divides `worldSize`, the global batch
/// divides by the replicas and the per-pipeline batch by --micro-batches. Throws
/// Error(kInvalidUsage).
void validatePipelineForWorld(const TrainOptions& o, int worldSize);

}  // namespace braid::trainer
