// braid-train --device cuda: data-parallel training on the GPU (trainer/cuda/README.md). Plain
// C++: main.cc includes it in every build; without the CUDA trainer it throws.
#pragma once

#include <cstdio>

#include "braid/braid.hpp"
#include "trainer/train/options.h"
#include "trainer/train/trainer.h"

namespace braid::trainer {

/// Whether this build has the CUDA trainer (BRAID_WITH_CUDA with cuBLAS and cuDNN found).
bool cudaTrainingBuilt();

/// runTraining()'s ddp loop with the model on CUDA device 0 (every rank of this host shares it,
/// each on its own stream): the same data, sampler, flags, epoch lines and logs; gradients
/// averaged through a DeviceCommunicator in the same buckets, started from the backward hook.
/// Throws kInvalidUsage in a build without the CUDA trainer, kCudaError without a GPU.
TrainSummary runCudaTraining(Communicator& comm, const TrainOptions& options, std::FILE* out);

}  // namespace braid::trainer
