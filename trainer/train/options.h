// braid-train's command line: every flag of the trainer and its validation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainer/data/sampler.h"
#include "trainer/nn/optimizer.h"
#include "trainer/train/loss_scaler.h"

namespace braid::trainer {

/// What one training run does. Filled by parseTrainOptions(); all ranks parse the same argv.
struct TrainOptions {
  std::string model = "mlp";            ///< "mlp" or "resnet"
  std::string optimizer = "adam";       ///< "sgd", "adam", "adamw"
  std::optional<float> lr;              ///< nullopt: 1e-3 for adam/adamw, 0.05 for sgd
  float momentum = 0.9f;                ///< SGD momentum
  float weightDecay = 0.0f;             ///< L2 (sgd/adam) or decoupled (adamw)
  int64_t warmupSteps = 0;              ///< linear learning-rate warm-up over this many steps
  std::string lrSchedule = "constant";  ///< constant | cosine (decay to 0 over the whole run)
  bool scaleLr = false;                 ///< linear scaling rule: lr x globalBatch / 256
  std::string precision = "fp32";  ///< "fp32", or "fp16": fp16 gradient all-reduce + loss scaling
  std::optional<float> lossScale;  ///< fp16: a fixed loss scale; nullopt: dynamic
  float initScale = 65536.0f;      ///< fp16: the first dynamic loss scale
  int epochs = 10;                 ///< passes over the training set
  int64_t batch = 128;             ///< GLOBAL batch: per-rank batch x ranks
  std::string dataDir;             ///< Fashion-MNIST directory (IDX files, plain or .gz)
  uint64_t seed = 0;               ///< model initialisation and shuffling
  double bucketMb = 25.0;          ///< gradient bucket size in MiB
  int accum = 1;                   ///< micro-batches per optimizer step (sync once per step)
  std::string logPath;             ///< per-epoch log, .csv or .json; empty: none
  std::string stepLogPath;         ///< --log-steps: one JSON line per step (ddp, pipeline)
  std::string report;              ///< --report scaling: run on reportRanks ranks, print a table
  std::vector<int> reportRanks = {1, 2, 4};  ///< --report-ranks: the rank counts of --report
  std::string braidrun;    ///< --braidrun: the launcher of --report (default: next to the binary)
  int64_t maxSteps = 0;    ///< stop after this many optimizer steps; 0: no limit
  int64_t limitTrain = 0;  ///< use only the first N training samples; 0: all
  int64_t limitTest = 0;   ///< use only the first N test samples; 0: all
  bool checkSync = false;  ///< hash parameters after every step and compare ranks
  int threads = 0;         ///< BLAS threads per rank; 0: cores / ranks (at least 1)
  std::string dumpParams;  ///< rank 0 writes the final flat parameters (raw float32)
  bool quiet = false;      ///< no progress bar / progress lines
  std::string checkpointDir;     ///< where checkpoints are written / resumed from
  int64_t checkpointEvery = 0;   ///< rank 0 writes a checkpoint every K steps; 0: never
  bool resume = false;           ///< continue from the newest complete checkpoint
  std::string dumpGrads;         ///< rank 0 writes the last step's flat gradients (raw float32)
  std::string device = "cpu";    ///< cpu, or cuda: ddp on the GPU (trainer/cuda/)
  bool tf32 = false;             ///< --device cuda: TF32 tensor cores in the convolutions
  std::string strategy = "ddp";  ///< ddp (data parallel), ps (trainer/ps/) or pipeline
                                 ///< (trainer/pipeline/); strategy_flags.h
  int psServers = 0;             ///< --ps N: ranks 0..N-1 hold the parameters (strategy ps)
  std::string psMode = "sync";   ///< ps: "sync" (every worker each step) or "async"
  std::optional<int64_t> maxStaleness;  ///< ps async: apply no update more than K versions old
  std::string stalenessLog;             ///< ps: JSON lines, one per update a server received
  int stages = 1;                       ///< pipeline: stages per pipeline (ranks / stages replicas)
  int microBatches = 1;                 ///< pipeline: micro-batches per pipeline batch
  std::string schedule = "gpipe";       ///< pipeline: gpipe or 1f1b
  std::string partition = "params";     ///< pipeline: balance stages by params or measured time

  /// The shares the training data is split into: every rank for ddp, the workers for ps, the
  /// pipelines (ranks / --stages) for pipeline.
  int dataRanks(int worldSize) const;

  /// How data share `dataRank` of `dataRanks` takes its batches of a `datasetSize`-sample set:
  /// shuffled by --seed, global batch --batch, the short last batch dropped with --accum > 1 or
  /// --strategy pipeline (so every micro-batch has the same size).
  SamplerOptions samplerOptions(int64_t datasetSize, int dataRank, int dataRanks) const;

  /// The loss scaler settings these flags give (meaningful with --precision fp16).
  LossScalerOptions lossScalerOptions() const;

  /// The optimizer settings these flags give for `globalBatch`.
  OptimizerOptions optimizerOptions() const;
};

/// Outcome of parsing: run with `options`, or exit at once with `exitCode` (after --help, or a
/// flag error that CLI11 already printed).
struct ParseResult {
  TrainOptions options;
  std::optional<int> exitCode;
};

/// Parses argv with CLI11. Prints --help / flag errors itself (the latter to stderr) and then
/// returns an exitCode (0 for --help, non-zero for errors). Semantic checks that need no
/// communicator (precision, model, optimizer, numbers in range) throw Error(kInvalidUsage).
ParseResult parseTrainOptions(int argc, const char* const* argv);

/// Checks the flags that depend on the rank count: the global batch must be a multiple of the
/// data ranks (dataRanks()), and the per-rank batch a multiple of --accum; --ps must leave at
/// least one worker. With --strategy pipeline instead: --stages divides `worldSize`, the global
/// batch divides by the replicas (worldSize / stages) and the per-pipeline batch by
/// --micro-batches. Throws Error(kInvalidUsage).
void validateForWorld(const TrainOptions& options, int worldSize);

}  // namespace braid::trainer
