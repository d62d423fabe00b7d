#include "trainer/ps/ps_training.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/env.h"
#include "common/error.h"
#include "trainer/data/sampler.h"
#include "trainer/nn/blas.h"
#include "trainer/nn/models.h"
#include "trainer/ps/context.h"
#include "trainer/ps/links.h"
#include "trainer/ps/ps_checkpoint.h"
#include "trainer/ps/server.h"
#include "trainer/ps/worker.h"
#include "trainer/train/batch_step.h"

namespace braid::trainer::ps {
namespace {

std::string runInfo(const PsContext& ctx, int threads) {
  const TrainOptions& o = ctx.options;
  const OptimizerOptions opt = o.optimizerOptions();
  return nlohmann::json{
      {"strategy", "ps"},
      {"mode", o.psMode},
      {"servers", ctx.layout.servers},
      {"workers", ctx.layout.workers()},
      {"max_staleness", o.maxStaleness ? nlohmann::json(*o.maxStaleness) : nlohmann::json("none")},
      {"model", o.model},
      {"optimizer", o.optimizer},
      {"lr", opt.lr},
      {"epochs", o.epochs},
      {"global_batch", o.batch},
      {"ranks", ctx.layout.worldSize},
      {"accum", o.accum},
      {"seed", o.seed},
      {"threads_per_rank", threads},
      {"params", ctx.numParams}}
      .dump();
}

}  // namespace

void runPsTraining(Communicator& world, const TrainOptions& o, std::FILE* out) {
  const int rank = world.rank(), size = world.size();
  validateForWorld(o, size);
  const PsLayout layout{o.psServers, size};
  const bool server = layout.isServer(rank);
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int threads = o.threads > 0 ? o.threads : std::max(1, cores / size);
  setBlasThreads(threads);

  PsLinks links(world, layout);
  auto model = makeModel(o.model, o.seed);  // the same seed on every rank: the same start

  // Only workers read the data; the servers learn the sample count from the first worker.
  Dataset train, test;
  int64_t trainSamples = 0;
  if (!server) {
    const std::string dir = o.dataDir.empty() ? kDefaultFashionMnistDir : o.dataDir;
    train = loadFashionMnist(dir, Split::kTrain);
    test = loadFashionMnist(dir, Split::kTest);
    truncateDataset(train, o.limitTrain);
    truncateDataset(test, o.limitTest);
    trainSamples = train.count;
  }
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
    runWorker(ctx, *model, train, test);
  }
}

}  // namespace braid::trainer::ps
