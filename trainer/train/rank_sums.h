// A rank's training sums and test counts added up over a communicator's ranks (the data-parallel
// ranks, or the pipelines' stages).
#pragma once

#include "braid/braid.hpp"
#include "trainer/train/batch_step.h"
#include "trainer/train/batch_sums.h"

namespace braid::trainer {

/// `mine` summed over `comm`'s ranks (every rank gets the total).
BatchSums sumOverRanks(Communicator& comm, const BatchSums& mine);

/// The test accuracy of `mine` summed over `comm`'s ranks: correct / seen (0 when none seen).
double accuracyOverRanks(Communicator& comm, const EvalCounts& mine);

}  // namespace braid::trainer
