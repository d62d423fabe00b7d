// braid-train --strategy ps: parameter-server training (README.md in this folder).
#pragma once

#include <cstdio>

#include "braid/braid.hpp"
#include "trainer/train/options.h"

namespace braid::trainer::ps {

/// Collective over `world` (>= 2 ranks): ranks 0..--ps-1 serve shards of the parameters, the
/// others train as workers (sync or async, --mode). Rank 0 prints the epochs to `out` (nullptr:
/// nothing) and writes --log and --dump-params. Throws braid::Error on bad flags, missing data,
/// a lost server (every rank), a lost worker in sync mode, and checkpoint problems.
void runPsTraining(Communicator& world, const TrainOptions& options, std::FILE* out);

}  // namespace braid::trainer::ps
