#include "trainer/train/strategy_flags.h"

#include <string>

#include "common/error.h"

namespace braid::trainer {
namespace {

constexpr const char* kPsFlags[] = {"--ps", "--mode", "--max-staleness", "--staleness-log"};
constexpr const char* kPipelineFlags[] = {"--stages", "--micro-batches", "--schedule",
                                          "--partition"};

/// Throws unless `o.strategy` is `owner` or none of `flags` was given.
template <size_t N>
void refuseForeignFlags(const CLI::App& app, const TrainOptions& o, const char* owner,
                        const char* const (&flags)[N], const char* names) {
  if (o.strategy == owner) return;
  for (const char* flag : flags) {
    BRAID_ENFORCE(app.count(flag) == 0, ErrorCode::kInvalidUsage,
                  "{} need --strategy {} (got {} with --strategy {})", names, owner, flag,
                  o.strategy);
  }
}

void validatePsFlags(const TrainOptions& o) {
  BRAID_ENFORCE(o.psServers >= 1, ErrorCode::kInvalidUsage,
                "--strategy ps needs --ps N with N >= 1 server ranks (got --ps {})", o.psServers);
  BRAID_ENFORCE(o.psMode == "sync" || o.psMode == "async", ErrorCode::kInvalidUsage,
                "--mode '{}' is unknown; use sync or async", o.psMode);
  BRAID_ENFORCE(!o.maxStaleness || o.psMode == "async", ErrorCode::kInvalidUsage,
                "--max-staleness {} needs --mode async (sync mode has no stale updates)",
                o.maxStaleness.value_or(0));
  BRAID_ENFORCE(!o.maxStaleness || *o.maxStaleness >= 0, ErrorCode::kInvalidUsage,
                "--max-staleness {} must not be negative", o.maxStaleness.value_or(0));
  BRAID_ENFORCE(o.precision == "fp32", ErrorCode::kInvalidUsage,
                "--precision {} is for --strategy ddp; ps sends float32 gradients", o.precision);
  BRAID_ENFORCE(!o.checkSync, ErrorCode::kInvalidUsage,
                "--check-sync is for --strategy ddp (ps workers pull one copy from the servers)");
  BRAID_ENFORCE(o.dumpGrads.empty(), ErrorCode::kInvalidUsage,
                "--dump-grads is for --strategy ddp or pipeline (ps workers send their gradients "
                "to the servers, which apply them one by one)");
  BRAID_ENFORCE(o.stepLogPath.empty(), ErrorCode::kInvalidUsage,
                "--log-steps is for --strategy ddp or pipeline (ps workers step on their own; "
                "see --staleness-log)");
}

/// What --strategy pipeline does not support, and its own numbers.
void validatePipelineFlags(const TrainOptions& o) {
  BRAID_ENFORCE(o.stages >= 1, ErrorCode::kInvalidUsage, "--stages {} must be at least 1",
                o.stages);
  BRAID_ENFORCE(o.microBatches >= 1, ErrorCode::kInvalidUsage,
                "--micro-batches {} must be at least 1", o.microBatches);
  BRAID_ENFORCE(o.accum == 1, ErrorCode::kInvalidUsage,
                "--accum {} with --strategy pipeline: use --micro-batches (the pipeline's "
                "micro-batches accumulate)",
                o.accum);
  BRAID_ENFORCE(o.precision == "fp32", ErrorCode::kInvalidUsage,
                "--precision {} with --strategy pipeline: only fp32", o.precision);
  BRAID_ENFORCE(o.checkpointDir.empty() && !o.resume && !o.checkSync, ErrorCode::kInvalidUsage,
                "--checkpoint-dir, --resume and --check-sync are not supported with --strategy "
                "pipeline");
}

}  // namespace

void addStrategyFlags(CLI::App& app, TrainOptions& o) {
  app.add_option("--strategy", o.strategy,
                 "ddp: data parallel (all-reduce); ps: parameter servers (trainer/ps/README.md); "
                 "pipeline: layers split into --stages (trainer/pipeline/README.md)")
      ->capture_default_str();
  app.add_option("--ps", o.psServers,
                 "ps: ranks 0..N-1 are servers holding the parameters, the others workers");
  app.add_option("--mode", o.psMode,
                 "ps: sync (every worker's gradient each step, = ddp over the workers) or async")
      ->capture_default_str();
  app.add_option("--max-staleness", o.maxStaleness,
                 "ps async: a gradient more than K versions old is not applied; its worker "
                 "pulls fresh parameters and computes it again (default: no bound)");
  app.add_option("--staleness-log", o.stalenessLog,
                 "ps: the servers append one JSON line per update received (staleness, worker)");
  app.add_option("--stages", o.stages, "pipeline: stages per pipeline (ranks / stages replicas)")
      ->capture_default_str();
  app.add_option("--micro-batches", o.microBatches,
                 "pipeline: micro-batches the per-pipeline batch is split into")
      ->capture_default_str();
  app.add_option("--schedule", o.schedule, "pipeline: gpipe (fill-drain) or 1f1b")
      ->check(CLI::IsMember({"gpipe", "1f1b"}))
      ->capture_default_str();
  app.add_option("--partition", o.partition,
                 "pipeline: balance stages by parameter count (params) or measured time (time)")
      ->check(CLI::IsMember({"params", "time"}))
      ->capture_default_str();
}

void validateStrategyFlags(const CLI::App& app, const TrainOptions& o) {
  BRAID_ENFORCE(o.strategy == "ddp" || o.strategy == "ps" || o.strategy == "pipeline",
                ErrorCode::kInvalidUsage, "--strategy '{}' is unknown; use ddp, ps or pipeline",
                o.strategy);
  refuseForeignFlags(app, o, "ps", kPsFlags, "--ps, --mode, --max-staleness and --staleness-log");
  refuseForeignFlags(app, o, "pipeline", kPipelineFlags,
                     "--stages, --micro-batches, --schedule and --partition");
  if (o.strategy == "ps") validatePsFlags(o);
  if (o.strategy == "pipeline") validatePipelineFlags(o);
}

void validatePipelineForWorld(const TrainOptions& o, int worldSize) {
  BRAID_ENFORCE(worldSize % o.stages == 0, ErrorCode::kInvalidUsage,
                "--stages {} does not divide the {} ranks (ranks = stages x replicas)", o.stages,
                worldSize);
  const int replicas = worldSize / o.stages;
  BRAID_ENFORCE(o.batch % replicas == 0, ErrorCode::kInvalidUsage,
                "--batch {} (the global batch) is not divisible by the {} pipeline replicas "
                "({} ranks / --stages {})",
                o.batch, replicas, worldSize, o.stages);
  const int64_t perPipeline = o.batch / replicas;
  BRAID_ENFORCE(perPipeline % o.microBatches == 0, ErrorCode::kInvalidUsage,
                "the per-pipeline batch {} (--batch {} / {} replicas) is not divisible by "
                "--micro-batches {}",
                perPipeline, o.batch, replicas, o.microBatches);
}

}  // namespace braid::trainer
