// The set-up every strategy (ddp, ps, pipeline) shares: BLAS threads, the data and the optimizer
// settings of a run (the sampler's: TrainOptions::samplerOptions).
#pragma once

#include <cstdint>

#include "trainer/data/dataset.h"
#include "trainer/nn/optimizer.h"
#include "trainer/train/options.h"

namespace braid::trainer {

/// Sets and returns the BLAS threads per rank: --threads, else cores / ranks (at least 1).
int applyBlasThreads(const TrainOptions& o, int ranks);

/// Fashion-MNIST's training and test sets from --data, cut to --limit-train / --limit-test.
struct TrainData {
  Dataset train;
  Dataset test;
};
TrainData loadTrainData(const TrainOptions& o);

/// --optimizer's settings, with the cosine schedule's length (the run's steps) filled in.
OptimizerOptions runOptimizerOptions(const TrainOptions& o, int64_t stepsPerEpoch);

}  // namespace braid::trainer
