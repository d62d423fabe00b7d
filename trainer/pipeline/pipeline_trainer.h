// braid-train --strategy pipeline: the model's layers split into stages over ranks.
#pragma once

#include <cstdio>

#include "braid/braid.hpp"
#include "trainer/train/options.h"
#include "trainer/train/trainer.h"

namespace braid::trainer {

/// Trains `options.model` with pipeline model parallelism, collective over all of `world`:
/// --stages S consecutive ranks form one pipeline (pipelineLayout), the model's top-level layers
/// are split into S contiguous stages by parameter count or measured time (partitionLayers),
/// and each step the per-pipeline batch runs as --micro-batches M through the stages in the
/// --schedule's order (StageStep). With world = S x R ranks there are R pipelines, each taking
/// its share of the global batch like a data-parallel rank; a stage's gradients are averaged
/// among its R replicas (a sub-communicator per stage) before each replica steps the optimizer
/// on its stage's parameters. Loss and accuracy come from the last stages, evaluation runs test
/// batches through the pipelines. Rank 0 prints the run line and one line per epoch (with the
/// measured bubble) to `out`, writes --log, and gathers --dump-params / --dump-grads from the
/// stages of pipeline 0. Throws braid::Error on bad flags (naming what is wrong: stages vs
/// ranks or layers, micro-batches vs batch), missing data and communication failures.
TrainSummary runPipelineTraining(Communicator& world, const TrainOptions& options, std::FILE* out);

}  // namespace braid::trainer
