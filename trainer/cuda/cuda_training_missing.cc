// The CUDA trainer's stand-in where the build has no CUDA or no cuDNN (BRAID_CUDA_TRAINER_MISSING
// says which): --device cuda fails with the reason.
#include "common/error.h"
#include "trainer/cuda/cuda_training.h"

namespace braid::trainer {

bool cudaTrainingBuilt() { return false; }

TrainSummary runCudaTraining(Communicator&, const TrainOptions&, std::FILE*) {
  fail(ErrorCode::kInvalidUsage,
       "--device cuda: this braid-train was built without the CUDA trainer ({}); configure with "
       "-DBRAID_WITH_CUDA=ON where nvcc, cuBLAS and cuDNN are installed, or use --device cpu",
       BRAID_CUDA_TRAINER_MISSING);
}

}  // namespace braid::trainer
