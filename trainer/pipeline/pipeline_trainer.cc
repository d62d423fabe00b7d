#include "trainer/pipeline/pipeline_trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>

#include "common/error.h"
#include "trainer/data/dataset.h"
#include "trainer/data/sampler.h"
#include "trainer/nn/optimizer.h"
#include "trainer/pipeline/group_communicator.h"
#include "trainer/pipeline/layer_timing.h"
#include "trainer/pipeline/partition.h"
#include "trainer/pipeline/schedule.h"
#include "trainer/pipeline/schedule_verifier.h"
#include "trainer/pipeline/stage_layout.h"
#include "trainer/pipeline/stage_step.h"
#include "trainer/train/batch_input.h"
#include "trainer/train/batch_step.h"
#include "trainer/train/epoch_log.h"
#include "trainer/train/epoch_steps.h"
#include "trainer/train/float_file.h"
#include "trainer/train/progress.h"
#include "trainer/train/rank_sums.h"
#include "trainer/train/run_setup.h"
#include "trainer/train/seconds.h"
#include "trainer/train/step_times.h"

namespace braid::trainer {
namespace {

/// Each top-level layer's cost for the partition: its parameter count, or (--partition time)
/// rank 0's measured seconds for one micro-batch, broadcast so every rank splits alike.
std::vector<double> layerCosts(Communicator& world, Model& model, const TrainOptions& o,
                               const std::vector<ParamRange>& ranges, int microSize) {
  if (o.partition == "params") return paramCosts(ranges);
  std::vector<double> costs(ranges.size(), 0.0);
  if (world.rank() == 0) costs = measureLayerSeconds(model, microSize);
  world.broadcast(costs.data(), costs.data(), costs.size(), DataType::kFloat64, 0);
  return costs;
}

/// Test accuracy: pipeline p evaluates test samples p, p + R, ... in batches that flow through
/// its stages; the last stages' counts are summed over the world.
double evaluatePipeline(Communicator& world, Model& model, const PipelineLayout& layout,
                        StageStep& stage, const Dataset& test) {
  Tensor x;
  std::vector<int32_t> labels;
  const EvalCounts mine = countCorrect(
      model, test, layout.pipeline, layout.replicas, [&](std::span<const int64_t> batch) {
        if (layout.first() || layout.last()) loadBatch(test, batch, model.inputShape, x, labels);
        return stage.infer(static_cast<int>(batch.size()), x, labels);
      });
  return accuracyOverRanks(world, mine);
}

/// --dump-params / --dump-grads: rank 0 (stage 0 of pipeline 0) collects every stage's slice of
/// `flat` from pipeline 0's ranks and writes the whole buffer. Collective over the world.
void dumpStages(Communicator& world, const PipelineLayout& layout,
                const std::vector<ParamRange>& stageRanges, float* flat, size_t count,
                const std::string& path, const char* flag) {
  if (path.empty() || world.rank() >= layout.stages) return;
  const ParamRange& mine = stageRanges[static_cast<size_t>(world.rank())];
  gatherFloatsFile(world, stageRanges, flat + mine.begin, flat, count, path, flag);
}

/// The bubble, the share of the stages' pipeline-phase time not spent in layer math (re-run
/// forwards count as math), beside (S-1)/(M+S-1), and each stage's compute / phase seconds,
/// from `stageSeconds` (compute, phase, re-run per stage).
std::string formatBubble(const std::vector<double>& stageSeconds, int micros) {
  const size_t stages = stageSeconds.size() / 3;
  double compute = 0, phase = 0, rerun = 0;
  std::string perStage;
  for (size_t s = 0; s < stages; ++s) {
    compute += stageSeconds[3 * s];
    phase += stageSeconds[3 * s + 1];
    rerun += stageSeconds[3 * s + 2];
    perStage +=
        fmt::format("{}{:.2f}/{:.2f}", s ? ", " : "", stageSeconds[3 * s], stageSeconds[3 * s + 1]);
  }
  return fmt::format(
      "bubble {:.1f}% measured, {:.1f}% expected ((S-1)/(M+S-1)); compute/phase s per stage: "
      "{}; re-run forwards {:.1f}% of compute",
      phase > 0 ? 100 * (1 - compute / phase) : 0.0,
      100 * expectedBubble(static_cast<int>(stages), micros), perStage,
      compute > 0 ? 100 * rerun / compute : 0.0);
}

std::string runInfo(const TrainOptions& o, const OptimizerOptions& opt, const PipelineLayout& l,
                    const StageBounds& bounds, size_t numParams, int threads) {
  const nlohmann::json pipeline = {
      {"stages", l.stages},     {"replicas", l.replicas},   {"micro_batches", o.microBatches},
      {"schedule", o.schedule}, {"partition", o.partition}, {"stage_layers", bounds}};
  return runInfoJson(o, opt.lr, l.stages * l.replicas, threads, numParams, pipeline.dump());
}

}  // namespace

TrainSummary runPipelineTraining(Communicator& world, const TrainOptions& o, std::FILE* out) {
  validateForWorld(o, world.size());
  const PipelineLayout layout = pipelineLayout(world.rank(), world.size(), o.stages);
  const bool lead = world.rank() == 0;
  const int threads = applyBlasThreads(o, world.size());

  // Every rank builds the whole model from the seed (the same initial values as a 1-rank run)
  // and runs only its stage's layers.
  auto model = makeModel(o.model, o.seed);
  ParamStore& store = model->store;
  const size_t n = store.numParams();
  const int64_t pipelineBatch = o.batch / layout.replicas;
  const int microSize = static_cast<int>(pipelineBatch / o.microBatches);
  const std::vector<ParamRange> layerRanges = layerParamRanges(model->net, n);
  const StageBounds bounds =
      partitionLayers(layerCosts(world, *model, o, layerRanges, microSize), o.stages);
  std::vector<ParamRange> stageRanges;
  for (int s = 0; s < o.stages; ++s) {
    stageRanges.push_back(stageParamRange(layerRanges, bounds[static_cast<size_t>(s)],
                                          bounds[static_cast<size_t>(s) + 1]));
  }
  const ParamRange mine = stageRanges[static_cast<size_t>(layout.stage)];
  const size_t firstLayer = bounds[static_cast<size_t>(layout.stage)];
  const size_t lastLayer = bounds[static_cast<size_t>(layout.stage) + 1];
  const auto shapes = layerInputShapes(*model);

  // The data after the partition, so a bad --stages fails before it is read.
  const TrainData data = loadTrainData(o);
  const Dataset& train = data.train;
  const Dataset& test = data.test;

  const PipelineSchedule schedule = parsePipelineSchedule(o.schedule);
  const auto allOps = pipelineOps(schedule, o.stages, o.microBatches);
  // The executor follows these lists; refuse to run one the verifier does not accept.
  const PipelineCheck check = verifyPipeline(allOps, o.microBatches);
  BRAID_ENFORCE(check.error.empty(), ErrorCode::kInternal,
                "{} schedule for {} stages, {} micro-batches: {}", o.schedule, o.stages,
                o.microBatches, check.error);
  const std::vector<StageOp>& ops = allOps[static_cast<size_t>(layout.stage)];

  // The replicas of this stage (one per pipeline): start from replica 0's values, average
  // gradients every step.
  std::optional<Communicator> group;
  if (layout.replicas > 1) {
    group.emplace(makeGroupCommunicator(world, layout.stage, layout.pipeline, layout.replicas));
    if (mine.size() > 0) {
      group->broadcast(store.params() + mine.begin, store.params() + mine.begin, mine.size(),
                       DataType::kFloat32, 0);
    }
    if (store.numBuffers() > 0) {
      group->broadcast(store.buffers(), store.buffers(), store.numBuffers(), DataType::kFloat32, 0);
    }
  }

  // Pipelines share the data as data-parallel ranks do; the short last batch is dropped so
  // every micro-batch has the same size.
  DistributedSampler sampler(o.samplerOptions(train.count, layout.pipeline, layout.replicas));
  const int64_t stepsPerEpoch = sampler.batchesPerEpoch(o.batch);

  const OptimizerOptions optOptions = runOptimizerOptions(o, stepsPerEpoch);
  Optimizer opt(optOptions, mine.size());  // this stage's parameters only

  std::unique_ptr<EpochLog> log;
  if (lead && !o.logPath.empty()) {
    log = std::make_unique<EpochLog>(o.logPath, runInfo(o, optOptions, layout, bounds, n, threads));
  }
  if (lead && out) {
    std::string sizes;
    for (const ParamRange& r : stageRanges)
      sizes += fmt::format("{}{}", sizes.empty() ? "" : "/", r.size());
    fmt::print(out,
               "braid-train: {} ({} params), {} lr {:g}, pipeline: {} stage(s) x {} replica(s), "
               "{} schedule, global batch {} = {} x {} micro-batch(es) of {} per pipeline, "
               "stages by {}: layers {} ({} params), {} BLAS thread(s)/rank, {} train / {} test "
               "samples\n",
               o.model, n, o.optimizer, opt.learningRate(), layout.stages, layout.replicas,
               o.schedule, o.batch, layout.replicas, o.microBatches, microSize, o.partition,
               formatBounds(bounds), sizes, threads, train.count, test.count);
    std::fflush(out);
  }

  StageStep stage(world, *model, layout, firstLayer, lastLayer, shapes[firstLayer],
                  shapes[lastLayer]);
  const double timeoutSeconds = defaultTimeoutSeconds();
  std::span<const int64_t> batch;  // the step's samples
  const MicroBatchLoader load = [&](int m, Tensor& x, std::vector<int32_t>& labels) {
    const auto part = batch.subspan(static_cast<size_t>(m) * static_cast<size_t>(microSize),
                                    static_cast<size_t>(microSize));
    loadBatch(train, part, model->inputShape, x, labels);
  };
  // Rank 0 holds no loss; pipeline 0's last stage shows the progress.
  const bool showsProgress = layout.pipeline == 0 && layout.last() && !o.quiet;
  std::unique_ptr<StepLog> stepLog;
  if (lead && !o.stepLogPath.empty()) stepLog = std::make_unique<StepLog>(o.stepLogPath);
  TrainSummary summary;
  bool stop = o.maxSteps > 0 && summary.steps >= o.maxSteps;
  for (int epoch = 0; epoch < o.epochs && !stop; ++epoch) {
    sampler.setEpoch(static_cast<uint64_t>(epoch));
    Progress progress(epoch + 1, o.epochs, stepsPerEpoch, !showsProgress);
    BatchSums sums;  // the last stages'; 0 elsewhere
    // Per stage, summed over its replicas: compute, pipeline-phase and re-run seconds.
    std::vector<double> stageSeconds(3 * static_cast<size_t>(o.stages), 0.0);
    double* mySeconds = &stageSeconds[3 * static_cast<size_t>(layout.stage)];
    StepTimes epochTimes;  // this rank's; the all-reduce is waited at once: no overlap
    StepTimes lastStep;
    const auto step = [&](const std::vector<int64_t>& indices) {
      const auto stepStart = Clock::now();
      batch = indices;
      store.zeroGrads();
      const StageStepStats st = stage.run(ops, o.microBatches, microSize, load);
      sums += st.sums;
      mySeconds[0] += st.computeSeconds;
      mySeconds[1] += st.seconds;
      mySeconds[2] += st.recomputeSeconds;
      lastStep = StepTimes{};
      lastStep.steps = 1;
      lastStep.samples = static_cast<int64_t>(indices.size()) * o.dataRanks(world.size());
      lastStep.computeSeconds = st.computeSeconds;
      lastStep.waitSeconds = st.waitSeconds;
      if (group && mine.size() > 0) {
        float* g = store.grads() + mine.begin;
        const auto t0 = Clock::now();
        Request r = group->allReduceAsync(g, g, mine.size(), DataType::kFloat32, RedOp::kAvg);
        try {
          r.wait(Deadline::after(2 * timeoutSeconds));
        } catch (const Error& e) {
          throw Error(e.code(), fmt::format("pipeline stage {} (rank {}): all-reduce of {} "
                                            "gradients among the stage's {} replicas: {}",
                                            layout.stage, world.rank(), mine.size(),
                                            layout.replicas, e.what()));
        }
        lastStep.waitSeconds += secondsSince(t0);
        lastStep.allReduceBytes = static_cast<int64_t>(mine.size() * sizeof(float));
      }
      const auto optStart = Clock::now();
      opt.step(store.params() + mine.begin, store.grads() + mine.begin);
      lastStep.computeSeconds += secondsSince(optStart);
      lastStep.stepSeconds = secondsSince(stepStart);
      epochTimes += lastStep;
    };
    const auto afterStep = [&](int64_t runStep) {
      if (stepLog) stepLog->add(runStep, epoch + 1, lastStep);
    };
    const EpochSteps e =
        runEpochSteps(sampler, progress, o.maxSteps, summary.steps, sums, step, afterStep);
    stop = e.reachedMax;

    const BatchSums total = sumOverRanks(world, sums);
    world.allReduce(stageSeconds.data(), stageSeconds.data(), stageSeconds.size(),
                    DataType::kFloat64, RedOp::kSum);
    if (group && store.numBuffers() > 0) {
      group->broadcast(store.buffers(), store.buffers(), store.numBuffers(), DataType::kFloat32, 0);
    }
    EpochStats s = epochStatsFromSums(epoch + 1, e.steps, total, e.epochSeconds,
                                      epochTimes.stepSeconds, epochTimes.waitSeconds);
    s.times = epochTimes;
    s.testAcc = evaluatePipeline(world, *model, layout, stage, test);
    summary.epochs.push_back(s);
    if (lead && out) {
      fmt::print(out, "{}\n  pipeline: {}\n", formatEpoch(s, o.epochs),
                 formatBubble(stageSeconds, o.microBatches));
      std::fflush(out);
    }
    if (log) log->add(s);
  }

  dumpStages(world, layout, stageRanges, store.params(), n, o.dumpParams, "--dump-params");
  dumpStages(world, layout, stageRanges, store.grads(), n, o.dumpGrads, "--dump-grads");
  return summary;
}

}  // namespace braid::trainer
