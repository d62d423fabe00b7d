// The set-up every strategy (ddp, ps, pipeline) shares: BLAS threads, the data and the optimizer
// settings of a run (the sampler's: TrainOptions::samplerOptions).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "braid/braid.hpp"
#include "trainer/data/dataset.h"
#include "trainer/nn/models.h"
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

/// The data-parallel model (ddp, on the CPU or the GPU): --model from --seed, then rank 0's
/// parameters and buffers broadcast, so every rank starts from them (they are equal already
/// when all ranks use the same seed, but a run must not depend on that).
std::unique_ptr<Model> makeReplicatedModel(Communicator& comm, const TrainOptions& o);

/// ddp's gradient buckets: --bucket-mb in float32 elements (at least 1) and the parameters'
/// first offsets (makeBuckets' arguments).
size_t bucketElements(const TrainOptions& o);
std::vector<size_t> paramOffsets(const ParamStore& store);

}  // namespace braid::trainer
