#include "trainer/train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>

#include "common/error.h"
#include "trainer/data/dataset.h"
#include "trainer/data/sampler.h"
#include "trainer/nn/loss.h"
#include "trainer/nn/models.h"
#include "trainer/train/batch_step.h"
#include "trainer/train/checkpoint.h"
#include "trainer/train/epoch_steps.h"
#include "trainer/train/float_file.h"
#include "trainer/train/grad_sync.h"
#include "trainer/train/loss_scaler.h"
#include "trainer/train/progress.h"
#include "trainer/train/rank_sums.h"
#include "trainer/train/run_setup.h"
#include "trainer/train/seconds.h"
#include "trainer/train/step_times.h"
#include "trainer/train/sync_check.h"

namespace braid::trainer {
namespace {

/// The JSON log's "run": the common keys and ddp's own.
std::string runInfo(const TrainOptions& o, int ranks, int threads, const OptimizerOptions& opt,
                    size_t numParams, size_t buckets) {
  const nlohmann::json ddp = {
      {"momentum", o.momentum},
      {"weight_decay", o.weightDecay},
      {"warmup_steps", o.warmupSteps},
      {"lr_schedule", o.lrSchedule},
      {"scale_lr", o.scaleLr},
      {"precision", o.precision},
      {"loss_scale", o.lossScale ? nlohmann::json(*o.lossScale) : nlohmann::json("dynamic")},
      {"init_scale", o.initScale},
      {"accum", o.accum},
      {"bucket_mb", o.bucketMb},
      {"buckets", buckets}};
  return runInfoJson(o, opt.lr, ranks, threads, numParams, ddp.dump());
}

/// --resume: rank 0 finds and verifies the newest complete checkpoint and broadcasts its path
/// and bytes, so every rank decodes, checks and restores exactly the same state (parameters,
/// buffers and optimizer state of rank 0's file). When rank 0 finds none it broadcasts its error
/// message instead, so every rank fails with the same clear error. Returns the decoded state.
CheckpointState loadResumeState(Communicator& comm, const std::string& dir,
                                const CheckpointFingerprint& expected) {
  LoadedCheckpoint loaded;
  std::string error;
  uint64_t sizes[2] = {0, 0};  // path (or error) bytes, file bytes; 0 file bytes: an error
  if (comm.rank() == 0) {
    try {
      loaded = loadNewestCheckpoint(dir, stderr);
      sizes[0] = loaded.path.size();
      sizes[1] = loaded.bytes.size();
    } catch (const Error& e) {
      error = e.what();
      sizes[0] = error.size();
    }
  }
  if (comm.size() > 1) {
    comm.broadcast(sizes, sizes, 2, DataType::kUint64, 0);
    std::string& text = sizes[1] == 0 ? error : loaded.path;
    text.resize(sizes[0]);
    comm.broadcast(text.data(), text.data(), sizes[0], DataType::kUint8, 0);
    loaded.bytes.resize(sizes[1]);
    if (sizes[1] > 0) {
      comm.broadcast(loaded.bytes.data(), loaded.bytes.data(), sizes[1], DataType::kUint8, 0);
    }
  }
  if (sizes[1] == 0) throw Error(ErrorCode::kInvalidUsage, error);
  CheckpointState state = decodeCheckpoint(loaded.bytes, loaded.path);
  checkFingerprint(state.fingerprint, expected, loaded.path);
  return state;
}

}  // namespace

TrainSummary runTraining(Communicator& comm, const TrainOptions& o, std::FILE* out) {
  const int rank = comm.rank(), ranks = comm.size();
  const bool lead = rank == 0;
  validateForWorld(o, ranks);

  const int threads = applyBlasThreads(o, ranks);
  const TrainData data = loadTrainData(o);
  const Dataset& train = data.train;
  const Dataset& test = data.test;

  auto model = makeReplicatedModel(comm, o);
  ParamStore& store = model->store;
  const size_t n = store.numParams();

  GradSync sync(comm, store.grads(), paramOffsets(store), n, bucketElements(o));
  model->net.setGradReadyHook([&sync](size_t readyFrom) { sync.onGradReady(readyFrom); });
  const bool fp16 = o.precision == "fp16";
  sync.setHalfPrecision(fp16);
  LossScaler scaler(o.lossScalerOptions());

  DistributedSampler sampler(o.samplerOptions(train.count, rank, ranks));
  const int64_t stepsPerEpoch = sampler.batchesPerEpoch(o.batch);

  const OptimizerOptions optOptions = runOptimizerOptions(o, stepsPerEpoch);
  Optimizer opt(optOptions, n);

  // What a checkpoint of this run must match; see checkpoint.h.
  CheckpointFingerprint fingerprint;
  fingerprint.layoutHash = store.layoutHash();
  fingerprint.model = o.model;
  fingerprint.ranks = ranks;
  fingerprint.globalBatch = o.batch;
  fingerprint.optimizer = optimizerKindName(optOptions.kind);
  fingerprint.seed = o.seed;
  fingerprint.trainSamples = train.count;
  int firstEpoch = 0;
  std::optional<SamplerState> resumeAt;
  int64_t resumedStep = 0;
  if (o.resume) {
    CheckpointState ck = loadResumeState(comm, o.checkpointDir, fingerprint);
    BRAID_ENFORCE(ck.params.size() == n && ck.buffers.size() == store.numBuffers(),
                  ErrorCode::kInvalidUsage,
                  "checkpoint of step {} holds {} parameters and {} buffers, the model has {} "
                  "and {}",
                  ck.step, ck.params.size(), ck.buffers.size(), n, store.numBuffers());
    std::copy(ck.params.begin(), ck.params.end(), store.params());
    std::copy(ck.buffers.begin(), ck.buffers.end(), store.buffers());
    opt.loadState(ck.optimizer.data(), ck.optimizer.size());
    // fp16 skips leave the optimizer behind the loop's step count. A checkpoint without the
    // loss-scale section (fp32) starts fp16 from the initial scale.
    const int64_t skipped = ck.lossScale ? ck.lossScale->skippedSteps : 0;
    if (fp16 && ck.lossScale) {
      scaler.restore(ck.lossScale->scale, ck.lossScale->goodSteps, skipped);
    }
    BRAID_ENFORCE(opt.stepCount() == ck.step - skipped, ErrorCode::kInvalidUsage,
                  "checkpoint of step {} ({} skipped) holds optimizer state of step {}", ck.step,
                  skipped, opt.stepCount());
    sampler.restore(ck.sampler);  // validates the position against this data set
    firstEpoch = static_cast<int>(ck.sampler.epoch);
    resumeAt = ck.sampler;
    resumedStep = ck.step;
    if (lead && out) {
      fmt::print(out, "braid-train: resumed from step {} (epoch {}, batch {})\n", ck.step,
                 ck.sampler.epoch + 1, ck.sampler.batch);
    }
  }

  std::unique_ptr<EpochLog> log;
  if (lead && !o.logPath.empty()) {
    log = std::make_unique<EpochLog>(
        o.logPath, runInfo(o, ranks, threads, optOptions, n, sync.buckets().size()));
  }
  if (lead && out) {
    fmt::print(out,
               "braid-train: {} ({} params), {} lr {:g}, global batch {} over {} rank(s) x {} "
               "micro-batch(es), {} bucket(s), {} BLAS thread(s)/rank, {} train / {} test "
               "samples\n",
               o.model, n, o.optimizer, opt.learningRate(), o.batch, ranks, o.accum,
               sync.buckets().size(), threads, train.count, test.count);
    std::fflush(out);
  }

  std::unique_ptr<StepLog> stepLog;
  if (lead && !o.stepLogPath.empty()) stepLog = std::make_unique<StepLog>(o.stepLogPath);

  StepBuffers buffers;
  TrainSummary summary;
  summary.steps = resumedStep;
  bool stop = o.maxSteps > 0 && summary.steps >= o.maxSteps;
  for (int epoch = firstEpoch; epoch < o.epochs && !stop; ++epoch) {
    if (resumeAt && epoch == firstEpoch) {
      sampler.restore(*resumeAt);
    } else {
      sampler.setEpoch(static_cast<uint64_t>(epoch));
    }
    Progress progress(epoch + 1, o.epochs, stepsPerEpoch, !lead || o.quiet);
    BatchSums sums;        // this rank's samples
    StepTimes epochTimes;  // this rank's
    StepTimes lastStep;
    const int64_t skippedBefore = scaler.skippedSteps();
    const auto step = [&](const std::vector<int64_t>& indices) {
      const auto stepStart = Clock::now();
      store.zeroGrads();
      // fp16: the loss gradient carries the loss scale (GradScaler.scale(loss).backward()).
      const auto backwardStart = Clock::now();
      forwardBackward(
          *model, train, indices, o.accum, fp16 ? scaler.scale() : 1.0f, [&sync] { sync.arm(); },
          buffers, sums);
      sync.finishBackward();
      const double forwardBackwardSeconds = secondsSince(backwardStart);
      if (fp16) {
        sync.stepAndWaitScaled(opt, store.params(), scaler);
      } else {
        sync.stepAndWait(opt, store.params());
      }
      lastStep = sync.stepTimes();
      lastStep.computeSeconds += forwardBackwardSeconds;
      lastStep.stepSeconds = secondsSince(stepStart);
      lastStep.steps = 1;
      lastStep.samples = static_cast<int64_t>(indices.size()) * ranks;
      epochTimes += lastStep;
    };
    const auto afterStep = [&](int64_t runStep) {
      if (stepLog) stepLog->add(runStep, epoch + 1, lastStep);
      if (o.checkSync) checkParamsInSync(comm, store.params(), n, runStep);
      if (lead && o.checkpointEvery > 0 && runStep % o.checkpointEvery == 0) {
        CheckpointState ck;
        ck.fingerprint = fingerprint;
        ck.step = runStep;
        ck.sampler = sampler.state();
        if (static_cast<int64_t>(ck.sampler.batch) >= stepsPerEpoch) {
          ck.sampler = {ck.sampler.epoch + 1, 0};  // the epoch is done: resume at the next one
        }
        ck.params.assign(store.params(), store.params() + n);
        ck.buffers.assign(store.buffers(), store.buffers() + store.numBuffers());
        ck.optimizer = opt.saveState();
        if (fp16) {
          ck.lossScale =
              CheckpointLossScale{scaler.scale(), scaler.goodSteps(), scaler.skippedSteps()};
        }
        writeCheckpoint(o.checkpointDir, ck);
      }
    };
    const EpochSteps e =
        runEpochSteps(sampler, progress, o.maxSteps, summary.steps, sums, step, afterStep);
    stop = e.reachedMax;

    const BatchSums total = sumOverRanks(comm, sums);
    if (ranks > 1 && store.numBuffers() > 0) {
      comm.broadcast(store.buffers(), store.buffers(), store.numBuffers(), DataType::kFloat32, 0);
    }
    EpochStats s = epochStatsFromSums(epoch + 1, e.steps, total, e.epochSeconds,
                                      epochTimes.stepSeconds, epochTimes.waitSeconds);
    s.times = epochTimes;
    s.testAcc = accuracyOverRanks(comm, countCorrect(*model, test, rank, ranks));
    s.fp16 = fp16;
    s.skippedSteps = scaler.skippedSteps() - skippedBefore;
    s.lossScale = fp16 ? scaler.scale() : 1.0;
    summary.epochs.push_back(s);
    if (lead && out) {
      fmt::print(out, "{}\n", formatEpoch(s, o.epochs));
      std::fflush(out);
    }
    if (log) log->add(s);
  }

  summary.skippedSteps = scaler.skippedSteps();
  summary.lossScale = fp16 ? scaler.scale() : 1.0;
  if (lead && !o.dumpParams.empty()) {
    writeFloatsFile(o.dumpParams, store.params(), n, "--dump-params");
  }
  if (lead && !o.dumpGrads.empty()) writeFloatsFile(o.dumpGrads, store.grads(), n, "--dump-grads");
  return summary;
}

}  // namespace braid::trainer
