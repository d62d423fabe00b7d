// braid-train: Fashion-MNIST training over braid, data-parallel (ddp), parameter servers (ps) or
// pipeline stages (see trainer/train/README.md).
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>

#include "braid/braid.hpp"
#include "braid/store.hpp"
#include "comm/bootstrap/secret.h"
#include "common/env.h"
#include "common/error.h"
#include "trainer/cuda/cuda_training.h"
#include "trainer/pipeline/pipeline_trainer.h"
#include "trainer/ps/ps_training.h"
#include "trainer/train/options.h"
#include "trainer/train/scaling_report.h"
#include "trainer/train/trainer.h"

namespace {

/// Under braidrun/torchrun or mpirun: the launcher's communicator; otherwise a 1-rank one.
braid::Communicator makeCommunicator() {
  using braid::envString;
  if (envString("WORLD_SIZE") || envString("RANK") || envString("OMPI_COMM_WORLD_SIZE")) {
    return braid::Communicator::fromEnvironment();
  }
  // A private in-process job: a fresh secret rather than the insecure default (and its warning),
  // unless the environment names one.
  braid::Options options;
  if (!envString("BRAID_SECRET")) options.secret = braid::bootstrap::randomSecret(16);
  return braid::Communicator::fromStore(braid::makeInMemoryStore(), 0, 1, options);
}

/// The rank count the launcher announces (1 without one), so flags that depend on it are
/// refused before any rank starts the rendezvous.
int announcedWorldSize() {
  if (auto n = braid::envInt("WORLD_SIZE")) return static_cast<int>(*n);
  if (auto n = braid::envInt("OMPI_COMM_WORLD_SIZE")) return static_cast<int>(*n);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<braid::Communicator> comm;
  try {
    auto parsed = braid::trainer::parseTrainOptions(argc, argv);
    if (parsed.exitCode) return *parsed.exitCode;
    const int world = announcedWorldSize();
    if (!parsed.options.report.empty()) {
      BRAID_ENFORCE(!braid::envString("WORLD_SIZE") && !braid::envString("OMPI_COMM_WORLD_SIZE"),
                    braid::ErrorCode::kInvalidUsage,
                    "--report {} launches its own runs: start braid-train without a launcher",
                    parsed.options.report);
      braid::trainer::runScalingReport(argc, argv, parsed.options, stdout);
      return 0;
    }
    if (world > 0) braid::trainer::validateForWorld(parsed.options, world);
    comm.emplace(makeCommunicator());
    if (parsed.options.strategy == "ps") {
      braid::trainer::ps::runPsTraining(*comm, parsed.options, stdout);
    } else if (parsed.options.strategy == "pipeline") {
      braid::trainer::runPipelineTraining(*comm, parsed.options, stdout);
    } else if (parsed.options.device == "cuda") {
      braid::trainer::runCudaTraining(*comm, parsed.options, stdout);
    } else {
      braid::trainer::runTraining(*comm, parsed.options, stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "braid-train: error: {}\n", e.what());
    // Peers blocked in a collective with this rank fail at once instead of at their timeout.
    if (comm) comm->abort();
    return 1;
  }
}
