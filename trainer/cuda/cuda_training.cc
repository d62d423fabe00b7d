#include "trainer/cuda/cuda_training.h"

#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>

#include "common/error.h"
#include "common/log.h"
#include "trainer/cuda/context.h"
#include "trainer/cuda/cuda_check.h"
#include "trainer/cuda/device_grad_sync.h"
#include "trainer/cuda/device_loss.h"
#include "trainer/cuda/device_model.h"
#include "trainer/cuda/device_optimizer.h"
#include "trainer/cuda/staged_upload.h"
#include "trainer/data/sampler.h"
#include "trainer/nn/models.h"
#include "trainer/train/batch_input.h"
#include "trainer/train/batch_step.h"
#include "trainer/train/epoch_steps.h"
#include "trainer/train/float_file.h"
#include "trainer/train/loss_scaler.h"
#include "trainer/train/progress.h"
#include "trainer/train/rank_sums.h"
#include "trainer/train/run_setup.h"
#include "trainer/train/seconds.h"
#include "trainer/train/step_times.h"
#include "trainer/train/sync_check.h"

namespace braid::trainer {

bool cudaTrainingBuilt() { return true; }

namespace {

constexpr int kDevice = 0;  // every rank of the host shares the first GPU

std::string deviceName(int device) {
  cudaDeviceProp prop{};
  BRAID_CUDA_CHECK(cudaGetDeviceProperties(&prop, device), "device {}", device);
  return prop.name;
}

}  // namespace

TrainSummary runCudaTraining(Communicator& comm, const TrainOptions& o, std::FILE* out) {
  using namespace cuda;
  const int rank = comm.rank(), ranks = comm.size();
  const bool lead = rank == 0;
  validateForWorld(o, ranks);
  BRAID_ENFORCE(o.strategy == "ddp" && (o.precision == "fp32" || o.precision == "fp16") &&
                    o.checkpointDir.empty(),
                ErrorCode::kInvalidUsage,
                "--device cuda: strategy {} precision {} checkpoints '{}' (parseTrainOptions lets "
                "only ddp, fp32 or fp16 and no checkpoints through)",
                o.strategy, o.precision, o.checkpointDir);
  const bool fp16 = o.precision == "fp16";
  // Said on every run until braid's own checks have run this path on a GPU (bench/RESULTS.md).
  if (lead) {
    BRAID_WARN(
        "braid-train --device cuda ({}) has not yet run on a GPU in braid's own checks; "
        "trainer_cuda_test compares every layer and step with the CPU: run it first",
        o.precision);
  }

  const TrainData data = loadTrainData(o);
  const Dataset& train = data.train;
  const Dataset& test = data.test;

  // The CPU model gives the layout and the initial values; rank 0's are everyone's.
  auto model = makeReplicatedModel(comm, o);
  ParamStore& store = model->store;
  const size_t n = store.numParams();

  CudaContext ctx(ContextOptions{kDevice, o.tf32, false, fp16});
  DeviceModel dmodel(*model, ctx);
  std::optional<DeviceCommunicator> dcomm;
  if (ranks > 1) dcomm.emplace(DeviceCommunicator::create(comm, kDevice));

  DeviceGradSync sync(dcomm ? &*dcomm : nullptr, ctx, dmodel.grads(), paramOffsets(store), n,
                      bucketElements(o));
  sync.setHalfPrecision(fp16);
  dmodel.setGradReadyHook([&sync](size_t readyFrom) { sync.onGradReady(readyFrom); });
  LossScaler scaler(o.lossScalerOptions());

  DistributedSampler sampler(o.samplerOptions(train.count, rank, ranks));
  const int64_t stepsPerEpoch = sampler.batchesPerEpoch(o.batch);
  const OptimizerOptions optOptions = runOptimizerOptions(o, stepsPerEpoch);
  DeviceOptimizer opt(optOptions, n, ctx);

  std::unique_ptr<EpochLog> log;
  if (lead && !o.logPath.empty()) {
    const nlohmann::json extra = {{"device", "cuda"},
                                  {"gpu", deviceName(kDevice)},
                                  {"momentum", o.momentum},
                                  {"weight_decay", o.weightDecay},
                                  {"warmup_steps", o.warmupSteps},
                                  {"lr_schedule", o.lrSchedule},
                                  {"scale_lr", o.scaleLr},
                                  {"precision", o.precision},
                                  {"tf32", o.tf32},
                                  {"accum", o.accum},
                                  {"bucket_mb", o.bucketMb},
                                  {"buckets", sync.buckets().size()}};
    nlohmann::json run = extra;
    if (fp16) {
      run["loss_scale"] = o.lossScale ? nlohmann::json(*o.lossScale) : nlohmann::json("dynamic");
      run["init_scale"] = o.initScale;
    }
    log = std::make_unique<EpochLog>(o.logPath,
                                     runInfoJson(o, optOptions.lr, ranks, 1, n, run.dump()));
  }
  if (lead && out) {
    fmt::print(out,
               "braid-train: {} ({} params) on cuda:{} ({}), {} lr {:g}, global batch {} over {} "
               "rank(s) x {} micro-batch(es), {} bucket(s), {} train / {} test samples\n",
               o.model, n, kDevice, deviceName(kDevice), o.optimizer, opt.learningRate(), o.batch,
               ranks, o.accum, sync.buckets().size(), train.count, test.count);
    std::fflush(out);
  }
  std::unique_ptr<StepLog> stepLog;
  if (lead && !o.stepLogPath.empty()) stepLog = std::make_unique<StepLog>(o.stepLogPath);

  // Two losses in turn: a step's loss is read once the next step is enqueued, so the GPU does
  // not wait for the host between steps (the last step of an epoch is read at once).
  DeviceSoftmaxCrossEntropy ceEven(ctx), ceOdd(ctx);
  DeviceSoftmaxCrossEntropy* pending = nullptr;  // enqueued, not yet added to the sums
  StagedUpload stageInput(ctx);
  Tensor hostX;
  std::vector<int32_t> labels;
  DeviceTensor x;
  TrainSummary summary;
  bool stop = o.maxSteps > 0 && summary.steps >= o.maxSteps;
  for (int epoch = 0; epoch < o.epochs && !stop; ++epoch) {
    sampler.setEpoch(static_cast<uint64_t>(epoch));
    Progress progress(epoch + 1, o.epochs, stepsPerEpoch, !lead || o.quiet);
    BatchSums sums;
    StepTimes epochTimes, lastStep;
    int64_t stepInEpoch = 0;
    const int64_t skippedBefore = scaler.skippedSteps();
    const auto step = [&](const std::vector<int64_t>& indices) {
      const auto stepStart = Clock::now();
      DeviceSoftmaxCrossEntropy& ce = summary.steps % 2 == 0 ? ceEven : ceOdd;
      dmodel.zeroGrads();
      const std::span<const int64_t> all(indices);
      const size_t micro = all.size() / static_cast<size_t>(o.accum);
      for (int k = 0; k < o.accum; ++k) {
        const bool last = k + 1 == o.accum;
        const auto part = all.subspan(k * micro, last ? all.size() - k * micro : micro);
        loadBatch(train, part, model->inputShape, hostX, labels);
        stageInput(hostX, x);
        if (last) sync.arm();
        ce.forward(dmodel.forward(x), labels);
        // fp16: the loss gradient carries the loss scale (GradScaler.scale(loss).backward()).
        const float lossScale = fp16 ? scaler.scale() : 1.0f;
        dmodel.backward(ce.backward(lossScale / static_cast<float>(o.accum)));
        if (!last) sums.add(ce.result());
      }
      if (fp16) {
        sync.stepScaled(opt, dmodel.params(), scaler);
      } else {
        sync.step(opt, dmodel.params());
      }
      ce.fetch();
      if (pending) sums.add(pending->result());  // the previous step is done
      pending = &ce;
      const bool lastOfEpoch =
          ++stepInEpoch == stepsPerEpoch || (o.maxSteps > 0 && summary.steps + 1 >= o.maxSteps);
      if (lastOfEpoch || o.checkSync) {
        sums.add(ce.result());
        pending = nullptr;
      }
      lastStep = StepTimes{};
      lastStep.stepSeconds = secondsSince(stepStart);
      lastStep.computeSeconds = lastStep.stepSeconds;  // the GPU's work; the host only enqueues
      // fp16: half the bytes, plus the overflow flag (as the CPU path counts).
      const size_t bytes = fp16 ? n * 2 + sizeof(int32_t) : n * sizeof(float);
      lastStep.allReduceBytes = ranks > 1 ? static_cast<int64_t>(bytes) : 0;
      lastStep.steps = 1;
      lastStep.samples = static_cast<int64_t>(indices.size()) * ranks;
      epochTimes += lastStep;
    };
    const auto afterStep = [&](int64_t runStep) {
      if (stepLog) stepLog->add(runStep, epoch + 1, lastStep);
      if (o.checkSync) {
        dmodel.paramsToHost(store);
        checkParamsInSync(comm, store.params(), n, runStep);
      }
    };
    const EpochSteps e =
        runEpochSteps(sampler, progress, o.maxSteps, summary.steps, sums, step, afterStep);
    stop = e.reachedMax;
    if (pending) {  // the sampler gave fewer batches than batchesPerEpoch() said
      sums.add(pending->result());
      pending = nullptr;
    }

    const BatchSums total = sumOverRanks(comm, sums);
    if (dcomm && dmodel.numBuffers() > 0) {
      dcomm->broadcast(dmodel.buffers(), dmodel.buffers(), dmodel.numBuffers(), DataType::kFloat32,
                       0, CudaStream{ctx.stream()});
    }
    EpochStats s = epochStatsFromSums(epoch + 1, e.steps, total, e.epochSeconds,
                                      epochTimes.stepSeconds, epochTimes.waitSeconds);
    s.times = epochTimes;
    dmodel.setTraining(false);
    const EvalCounts mine =
        countCorrect(*model, test, rank, ranks, [&](std::span<const int64_t> batch) {
          loadBatch(test, batch, model->inputShape, hostX, labels);
          stageInput(hostX, x);
          ceEven.forward(dmodel.forward(x), labels);
          return ceEven.result();
        });
    dmodel.setTraining(true);
    s.testAcc = accuracyOverRanks(comm, mine);
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
    dmodel.paramsToHost(store);
    writeFloatsFile(o.dumpParams, store.params(), n, "--dump-params");
  }
  if (lead && !o.dumpGrads.empty()) {
    dmodel.gradsToHost(store);
    writeFloatsFile(o.dumpGrads, store.grads(), n, "--dump-grads");
  }
  if (dcomm) dcomm->synchronize();
  ctx.synchronize();
  return summary;
}

}  // namespace braid::trainer
