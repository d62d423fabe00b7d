#include "trainer/ps/ps_training.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/env.h"
#include "common/error.h"
#include "trainer/data/sampler.h"
#include "trainer/nn/models.h"
#include "trainer/ps/context.h"
#include "trainer/ps/links.h"
#include "trainer/ps/ps_checkpoint.h"
#include "trainer/ps/server.h"
#include "trainer/ps/worker.h"
#include "trainer/train/run_setup.h"

namespace braid::trainer::ps {
namespace {

std::string runInfo(const PsContext& ctx, int threads) {
  const TrainOptions& o = ctx.options;
  const nlohmann::json ps = {
      {"mode", o.psMode},
      {"servers", ctx.layout.servers},
      {"workers", ctx.layout.workers()},
      {"max_staleness", o.maxStaleness ? nlohmann::json(*o.maxStaleness) : nlohmann::json("none")},
      {"accum", o.accum}};
  return runInfoJson(o, o.optimizerOptions().lr, ctx.layout.worldSize, threads, ctx.numParams,
                     ps.dump());
}

}  // namespace

void runPsTraining(Communicator& world, const TrainOptions& o, std::FILE* out) {
  const int rank = world.rank(), size = world.size();
  validateForWorld(o, size);
  const PsLayout layout{o.psServers, size};
  const bool server = layout.isServer(rank);
  const int threads = applyBlasThreads(o, size);

  PsLinks links(world, layout);
  auto model = makeModel(o.model, o.seed);  // the same seed on every rank: the same start

  // Only workers read the data; the servers learn the sample count from the first worker.
  TrainData data;
  if (!server) data = loadTrainData(o);
  int64_t trainSamples = data.train.count;
  world.broadcast(&trainSamples, &trainSamples, 1, DataType::kInt64, layout.workerRank(0));

  PsContext ctx{world, o, layout, links, rank == 0 ? out : nullptr};
  ctx.numParams = model->store.numParams();
  ctx.layoutHash = model->store.layoutHash();
  ctx.trainSamples = trainSamples;
  ctx.batchesPerEpoch = DistributedSampler(o.samplerOptions(trainSamples, 0, layout.workers()))
                            .batchesPerEpoch(o.batch);

  ResumePoint resume;
  if (o.resume) {
    resume = agreeOnResume(world, layout, o.checkpointDir,
                           server ? serverFingerprint(ctx) : CheckpointFingerprint{},
                           ctx.batchesPerEpoch);
    ctx.startPosition = resume.position;
    if (ctx.out) {
      fmt::print(ctx.out,
                 "braid-train: ps resumed from version {} (each worker at epoch {}, "
                 "batch {})\n",
                 resume.state ? resume.state->step : 0, resume.position / ctx.batchesPerEpoch + 1,
                 resume.position % ctx.batchesPerEpoch);
    }
  }
  if (ctx.out) {
    fmt::print(ctx.out,
               "braid-train: ps {} ({} params), {} servers (ranks 0..{}) + {} workers, {} mode{}, "
               "{} lr {:g}, global batch {} ({} per worker), {} train samples\n",
               o.model, ctx.numParams, layout.servers, layout.servers - 1, layout.workers(),
               o.psMode, o.maxStaleness ? fmt::format(" (max staleness {})", *o.maxStaleness) : "",
               o.optimizer, o.optimizerOptions().lr, o.batch, o.batch / layout.workers(),
               trainSamples);
    const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    if (size > cores && !envString("BRAID_SPIN_US")) {
      // Each link is a 2-rank communicator that does not know the host is oversubscribed, so
      // its waits spin for braid's default 2 ms (README.md, "Speed").
      fmt::print(ctx.out,
                 "braid-train: note: {} ranks on {} cores: BRAID_SPIN_US=20 makes the ps links "
                 "yield sooner (several times faster here)\n",
                 size, cores);
    }
    std::fflush(ctx.out);
  }
  if (server) {
    std::unique_ptr<EpochLog> log;
    if (rank == 0 && !o.logPath.empty()) {
      log = std::make_unique<EpochLog>(o.logPath, runInfo(ctx, threads));
    }
    std::vector<float> initial(model->store.params(), model->store.params() + ctx.numParams);
    runServer(ctx, initial, resume, std::move(log));
  } else {
    runWorker(ctx, *model, data.train, data.test);
  }
}

}  // namespace braid::trainer::ps
