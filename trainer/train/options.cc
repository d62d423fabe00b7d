#include "trainer/train/options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "trainer/train/strategy_flags.h"

namespace braid::trainer {
OptimizerOptions TrainOptions::optimizerOptions() const {
  OptimizerOptions o;
  o.kind = parseOptimizerKind(optimizer);
  o.lr = lr.value_or(o.kind == OptimizerKind::kSgd ? 0.05f : 1e-3f);
  o.momentum = momentum;
  o.weightDecay = weightDecay;
  o.warmupSteps = warmupSteps;
  o.linearScaling = scaleLr;
  o.globalBatch = batch;
  return o;
}

int TrainOptions::dataRanks(int worldSize) const {
  if (strategy == "ps") return worldSize - psServers;
  if (strategy == "pipeline") return worldSize / stages;
  return worldSize;
}

SamplerOptions TrainOptions::samplerOptions(int64_t datasetSize, int dataRank,
                                            int dataRanks) const {
  SamplerOptions so;
  so.datasetSize = datasetSize;
  so.rank = dataRank;
  so.worldSize = dataRanks;
  so.globalBatch = batch;
  so.seed = seed;
  so.shuffle = true;
  so.dropLastBatch = accum > 1 || strategy == "pipeline";
  return so;
}

LossScalerOptions TrainOptions::lossScalerOptions() const {
  LossScalerOptions o;
  o.initScale = initScale;
  o.fixedScale = lossScale;
  return o;
}

ParseResult parseTrainOptions(int argc, const char* const* argv) {
  ParseResult result;
  TrainOptions& o = result.options;
  CLI::App app{
      "braid-train: training of an MLP or a small ResNet on Fashion-MNIST over braid, data "
      "parallel (ddp), with parameter servers (ps) or in pipeline stages (pipeline). Run directly "
      "for one rank, or under `braidrun -n N` / mpirun for N ranks.",
      "braid-train"};
  app.add_option("--model", o.model, "mlp (784-256-128-10) or resnet")->capture_default_str();
  app.add_option("--optimizer", o.optimizer, "sgd, adam or adamw")->capture_default_str();
  app.add_option("--lr", o.lr, "base learning rate (default 1e-3 for adam/adamw, 0.05 for sgd)");
  app.add_option("--momentum", o.momentum, "SGD momentum")->capture_default_str();
  app.add_option("--weight-decay", o.weightDecay, "weight decay (decoupled for adamw)")
      ->capture_default_str();
  app.add_option("--lr-schedule", o.lrSchedule,
                 "after warm-up: constant, or cosine (decays to 0 over the run's steps)")
      ->check(CLI::IsMember({"constant", "cosine"}))
      ->capture_default_str();
  app.add_option("--warmup-steps", o.warmupSteps, "linear learning-rate warm-up steps")
      ->capture_default_str();
  app.add_flag("--scale-lr", o.scaleLr, "linear scaling rule: lr x global batch / 256");
  app.add_option("--precision", o.precision,
                 "fp32, or fp16: float32 master weights, gradients all-reduced as float16 (half "
                 "the bytes), dynamic loss scaling; compute float32 on the CPU (no fast fp16 "
                 "GEMM), half GEMMs and convolutions with --device cuda")
      ->capture_default_str();
  app.add_option("--loss-scale", o.lossScale,
                 "fp16: a fixed loss scale (default: dynamic, halved on inf/NaN, doubled after "
                 "2000 good steps)");
  app.add_option("--init-scale", o.initScale, "fp16: the first dynamic loss scale")
      ->capture_default_str();
  app.add_option("--epochs", o.epochs, "passes over the training set")->capture_default_str();
  app.add_option("--batch", o.batch,
                 "GLOBAL batch size, summed over all ranks (per-rank batch = batch / ranks)")
      ->capture_default_str();
  app.add_option("--data", o.dataDir,
                 "Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist)");
  app.add_option("--seed", o.seed, "seed of initialisation and shuffling")->capture_default_str();
  app.add_option("--bucket-mb", o.bucketMb, "gradient all-reduce bucket size in MiB")
      ->capture_default_str();
  app.add_option("--accum", o.accum, "micro-batches per step (gradient accumulation)")
      ->capture_default_str();
  app.add_option("--log", o.logPath,
                 "per-epoch log file, .csv or .json (with --report scaling: the report's table)");
  app.add_option("--log-steps", o.stepLogPath,
                 "rank 0 writes one JSON line per optimizer step to FILE (timing, bytes; ddp and "
                 "pipeline)");
  app.add_option("--report", o.report,
                 "scaling: run this training on each --report-ranks count (through braidrun) and "
                 "print samples/s, speedup, scaling efficiency, comm and overlap shares");
  app.add_option("--report-ranks", o.reportRanks, "rank counts of --report, ascending")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--braidrun", o.braidrun,
                 "the launcher --report uses (default: braidrun next to braid-train or in "
                 "../tools/)");
  app.add_option("--max-steps", o.maxSteps, "stop after this many optimizer steps (0: no limit)")
      ->capture_default_str();
  app.add_option("--limit-train", o.limitTrain, "use only the first N training samples (0: all)")
      ->capture_default_str();
  app.add_option("--limit-test", o.limitTest, "use only the first N test samples (0: all)")
      ->capture_default_str();
  app.add_flag("--check-sync", o.checkSync,
               "after every step compare a hash of the parameters across ranks (debug)");
  app.add_option("--threads", o.threads,
                 "BLAS threads per rank (default: cores / ranks, at least 1)");
  app.add_option("--dump-params", o.dumpParams,
                 "rank 0 writes the final flat parameters to FILE as raw float32");
  app.add_flag("--quiet", o.quiet, "no progress bar or progress lines");
  app.add_option("--checkpoint-dir", o.checkpointDir,
                 "directory of checkpoints (ckpt-<step>.bin, the newest 2 kept)");
  app.add_option("--checkpoint-every", o.checkpointEvery,
                 "rank 0 writes a checkpoint every K optimizer steps (0: never)")
      ->capture_default_str();
  app.add_flag("--resume", o.resume,
               "continue from the newest complete checkpoint in --checkpoint-dir "
               "(same model, rank count, --batch, optimizer, --seed and data)");
  app.add_option("--dump-grads", o.dumpGrads,
                 "rank 0 writes the last step's flat (averaged) gradients to FILE as raw float32");
  app.add_option("--device", o.device,
                 "cpu, or cuda: the model on GPU 0 (shared by the ranks of a host), cuBLAS and "
                 "cuDNN, gradients averaged on the device (ddp, fp32)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_flag("--tf32", o.tf32,
               "--device cuda: let cuDNN use TF32 tensor cores for the float32 convolutions "
               "(PyTorch's cudnn.allow_tf32); GEMMs stay float32");
  addStrategyFlags(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    result.exitCode = app.exit(e);
    return result;
  }

  BRAID_ENFORCE(o.precision == "fp32" || o.precision == "fp16", ErrorCode::kInvalidUsage,
                "--precision '{}' is unknown; use fp32 or fp16", o.precision);
  BRAID_ENFORCE(!o.lossScale || (std::isfinite(*o.lossScale) && *o.lossScale > 0),
                ErrorCode::kInvalidUsage, "--loss-scale {} must be positive and finite",
                o.lossScale.value_or(0));
  BRAID_ENFORCE(std::isfinite(o.initScale) && o.initScale > 0, ErrorCode::kInvalidUsage,
                "--init-scale {} must be positive and finite", o.initScale);
  BRAID_ENFORCE(o.model == "mlp" || o.model == "resnet", ErrorCode::kInvalidUsage,
                "--model '{}' is unknown; use mlp or resnet", o.model);
  BRAID_ENFORCE(o.optimizer == "sgd" || o.optimizer == "adam" || o.optimizer == "adamw",
                ErrorCode::kInvalidUsage, "--optimizer '{}' is unknown; use sgd, adam or adamw",
                o.optimizer);
  BRAID_ENFORCE(o.epochs >= 1, ErrorCode::kInvalidUsage, "--epochs {} must be at least 1",
                o.epochs);
  BRAID_ENFORCE(o.batch >= 1, ErrorCode::kInvalidUsage, "--batch {} must be at least 1", o.batch);
  BRAID_ENFORCE(o.accum >= 1, ErrorCode::kInvalidUsage, "--accum {} must be at least 1", o.accum);
  BRAID_ENFORCE(o.bucketMb > 0, ErrorCode::kInvalidUsage, "--bucket-mb {} must be positive",
                o.bucketMb);
  BRAID_ENFORCE(!o.lr || *o.lr > 0, ErrorCode::kInvalidUsage, "--lr {} must be positive",
                o.lr.value_or(0));
  BRAID_ENFORCE(o.warmupSteps >= 0 && o.maxSteps >= 0 && o.limitTrain >= 0 && o.limitTest >= 0 &&
                    o.threads >= 0,
                ErrorCode::kInvalidUsage,
                "--warmup-steps, --max-steps, --limit-train, --limit-test and --threads must not "
                "be negative");
  BRAID_ENFORCE(o.checkpointEvery >= 0, ErrorCode::kInvalidUsage,
                "--checkpoint-every {} must not be negative", o.checkpointEvery);
  BRAID_ENFORCE(o.checkpointEvery == 0 || !o.checkpointDir.empty(), ErrorCode::kInvalidUsage,
                "--checkpoint-every {} needs --checkpoint-dir DIR", o.checkpointEvery);
  BRAID_ENFORCE(!o.resume || !o.checkpointDir.empty(), ErrorCode::kInvalidUsage,
                "--resume needs --checkpoint-dir DIR (where the checkpoints are)");
  validateStrategyFlags(app, o);
  BRAID_ENFORCE(!o.tf32 || o.device == "cuda", ErrorCode::kInvalidUsage,
                "--tf32 needs --device cuda");
  if (o.device == "cuda") {
    BRAID_ENFORCE(o.strategy == "ddp", ErrorCode::kInvalidUsage,
                  "--device cuda trains with --strategy ddp only (got {})", o.strategy);
    // fp16 on the GPU: half GEMMs and convolutions, float32 master weights, dynamic loss
    // scaling (trainer/cuda/README.md); --tf32 only concerns float32 convolutions.
    BRAID_ENFORCE(o.precision == "fp32" || !o.tf32, ErrorCode::kInvalidUsage,
                  "--tf32 is for float32 convolutions; with --precision fp16 they are half "
                  "already (drop --tf32)");
    BRAID_ENFORCE(o.checkpointDir.empty() && !o.resume, ErrorCode::kInvalidUsage,
                  "--device cuda has no checkpoints yet (drop --checkpoint-dir and --resume)");
  }
  BRAID_ENFORCE(o.report.empty() || o.report == "scaling", ErrorCode::kInvalidUsage,
                "--report '{}' is unknown; use scaling", o.report);
  BRAID_ENFORCE(!o.report.empty() || (app.count("--report-ranks") == 0 && o.braidrun.empty()),
                ErrorCode::kInvalidUsage, "--report-ranks and --braidrun need --report scaling");
  BRAID_ENFORCE(!o.reportRanks.empty() && o.reportRanks.front() >= 1 &&
                    std::adjacent_find(o.reportRanks.begin(), o.reportRanks.end(),
                                       [](int a, int b) { return b <= a; }) == o.reportRanks.end(),
                ErrorCode::kInvalidUsage,
                "--report-ranks {} must be positive rank counts in ascending order (e.g. 1,2,4)",
                fmt::format("{}", fmt::join(o.reportRanks, ",")));
  if (!o.logPath.empty()) {
    auto endsWith = [&](const char* ext) {
      std::string e(ext);
      return o.logPath.size() >= e.size() &&
             o.logPath.compare(o.logPath.size() - e.size(), e.size(), e) == 0;
    };
    BRAID_ENFORCE(endsWith(".csv") || endsWith(".json"), ErrorCode::kInvalidUsage,
                  "--log '{}' must end in .csv or .json", o.logPath);
  }
  return result;
}

void validateForWorld(const TrainOptions& o, int worldSize) {
  if (o.strategy == "pipeline") {
    validatePipelineForWorld(o, worldSize);
    return;
  }
  BRAID_ENFORCE(o.strategy != "ps" || o.psServers < worldSize, ErrorCode::kInvalidUsage,
                "--ps {} leaves no worker: the job has {} rank(s), and the servers are ranks "
                "0..{} (use --ps < ranks)",
                o.psServers, worldSize, o.psServers - 1);
  const int data = o.dataRanks(worldSize);
  const char* what = o.strategy == "ps" ? "workers" : "ranks";
  BRAID_ENFORCE(o.batch % data == 0, ErrorCode::kInvalidUsage,
                "--batch {} (the global batch) is not divisible by the {} {}", o.batch, data, what);
  const int64_t perRank = o.batch / data;
  BRAID_ENFORCE(perRank % o.accum == 0, ErrorCode::kInvalidUsage,
                "the per-rank batch {} (--batch {} / {} {}) is not divisible by --accum {}",
                perRank, o.batch, data, what, o.accum);
}

}  // namespace braid::trainer
