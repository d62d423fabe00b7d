#include "trainer/ps/server.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "common/error.h"
#include "kernels/kernels.h"
#include "trainer/nn/optimizer.h"
#include "trainer/ps/epoch_collector.h"
#include "trainer/ps/staleness_log.h"
#include "trainer/train/float_file.h"

namespace braid::trainer::ps {
namespace {

using Clock = std::chrono::steady_clock;

/// One worker as a server sees it.
struct WorkerSlot {
  enum class State { kActive, kDone, kLost };
  int rank = 0;
  int index = 0;
  PsLink* link = nullptr;
  PsMessage in, out;
  Request recv, send;
  bool sending = false;
  bool pushPending = false;  // sync: its gradient waits in `in` for the others'
  State state = State::kActive;
  int64_t position = 0;  // batches it has pushed (its sampler position)
  WorkerSlot(size_t shardElems) : in(shardElems), out(shardElems) {}
};

class Server {
 public:
  Server(PsContext& ctx, const std::vector<float>& initialParams, const ResumePoint& resume)
      : ctx_(ctx),
        o_(ctx.options),
        rank_(ctx.rank()),
        shard_(shardOf(ctx.numParams, ctx.layout.servers, ctx.rank())),
        params_(initialParams.begin() + shard_.begin, initialParams.begin() + shard_.end),
        opt_(ctx.options.optimizerOptions(), shard_.size()),
        log_(ctx.options.stalenessLog),
        collector_(ctx.layout.workers()),
        sum_(ctx.async() ? 0 : shard_.size()) {
    if (resume.state) {
      const CheckpointState& ck = *resume.state;
      BRAID_ENFORCE(ck.params.size() == shard_.size(), ErrorCode::kInvalidUsage,
                    "rank {}: checkpoint of version {} holds {} parameters, the shard has {}",
                    rank_, ck.step, ck.params.size(), shard_.size());
      params_ = ck.params;
      opt_.loadState(ck.optimizer.data(), ck.optimizer.size());
      version_ = ck.step;
    }
    for (int w = 0; w < ctx.layout.workers(); ++w) {
      auto slot = std::make_unique<WorkerSlot>(shard_.size());
      slot->index = w;
      slot->rank = ctx.layout.workerRank(w);
      slot->link = &ctx.links.to(slot->rank);
      slot->position = ctx.startPosition;
      workers_.push_back(std::move(slot));
    }
  }

  void serve() {
    try {
      for (auto& w : workers_) post(*w);
      auto lastMessage = Clock::now();
      while (active() > 0) {
        bool any = false;
        for (auto& w : workers_) {
          if (w->state != WorkerSlot::State::kActive || w->pushPending || !w->recv.test()) continue;
          any = true;
          try {
            w->link->wait(w->recv, "receive from a worker", w->in);
          } catch (const Error& e) {
            lose(*w, e);
            continue;
          }
          handle(*w);
        }
        if (!ctx_.async()) stepIfAllPushed();
        if (any) {
          lastMessage = Clock::now();
        } else {
          const double idle = std::chrono::duration<double>(Clock::now() - lastMessage).count();
          BRAID_ENFORCE(idle < timeoutSeconds(), ErrorCode::kTimeout,
                        "rank {} (server): no message from workers {} for {:.0f} s "
                        "(BRAID_TIMEOUT)",
                        rank_, activeRanks(), idle);
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
      }
      finishSends();
      BRAID_ENFORCE(lostRanks().empty() || doneCount() > 0, ErrorCode::kRemoteError,
                    "rank {} (server): every worker is gone ({})", rank_, lostRanks());
    } catch (const Error& e) {
      tellWorkers(e.what());
      throw;
    }
  }

  /// Server 0 writes the epochs to --log.
  void setEpochLog(std::unique_ptr<EpochLog> log) { epochLog_ = std::move(log); }
  /// The shard for --dump-params, the summary line's numbers.
  const std::vector<float>& params() const { return params_; }
  int64_t version() const { return version_; }
  const StalenessStats& total() const { return total_; }
  std::string lostRanks() const { return ranksIn(WorkerSlot::State::kLost); }

 private:
  double timeoutSeconds() const { return ctx_.links.all().begin()->second->timeoutSeconds(); }

  int active() const {
    int n = 0;
    for (const auto& w : workers_) n += w->state == WorkerSlot::State::kActive;
    return n;
  }
  int doneCount() const {
    int n = 0;
    for (const auto& w : workers_) n += w->state == WorkerSlot::State::kDone;
    return n;
  }
  std::string ranksIn(WorkerSlot::State s) const {
    std::string out;
    for (const auto& w : workers_) {
      if (w->state == s) out += (out.empty() ? "" : ", ") + std::to_string(w->rank);
    }
    return out;
  }
  std::string activeRanks() const { return ranksIn(WorkerSlot::State::kActive); }

  void post(WorkerSlot& w) { w.recv = w.link->recvAsync(w.in); }

  void handle(WorkerSlot& w) {
    const PsHeader h = w.in.header();
    switch (h.kind) {
      case PsKind::kPull:
        reply(w, PsKind::kParams, 0);
        post(w);
        return;
      case PsKind::kPush:
        w.position = h.epoch * ctx_.batchesPerEpoch + h.batch;
        if (ctx_.async()) {
          applyAsync(w, h);
          post(w);
        } else {
          w.pushPending = true;  // the gradient stays in w.in until every worker's is in
        }
        return;
      case PsKind::kEpochStats:
        collector_.report(w.index, static_cast<int>(h.epoch), WorkerEpoch::fromStats(h.stats));
        printEpochs();
        post(w);
        return;
      case PsKind::kDone:
        w.state = WorkerSlot::State::kDone;
        return;
      case PsKind::kServerLost:
        fail(ErrorCode::kRemoteError,
             "rank {} (server): server rank {} is gone (reported by worker rank {}); the job "
             "cannot go on without its shard",
             rank_, h.peer, w.rank);
      default:
        fail(ErrorCode::kInvalidUsage,
             "rank {} (server): unexpected message '{}' ({}) from worker rank {}", rank_,
             psKindName(h.kind), static_cast<int64_t>(h.kind), w.rank);
    }
  }

  void applyAsync(WorkerSlot& w, const PsHeader& h) {
    const int64_t staleness = version_ - h.version;
    const bool apply = !o_.maxStaleness || staleness <= *o_.maxStaleness;
    record(w, h.epoch, h.version, apply);
    if (apply) {
      opt_.step(params_.data(), w.in.payload().data());
      ++version_;
      if (rank_ == 0) collector_.step(static_cast<int>(h.epoch));
      maybeCheckpoint();
    }
    reply(w, apply ? PsKind::kParams : PsKind::kRejected, staleness);
  }

  /// Sync: once every active worker's gradient is in, their average (summed in worker order,
  /// then divided, as an all-reduce(avg) of float32 does) makes one optimizer step.
  void stepIfAllPushed() {
    int pushed = 0;
    for (const auto& w : workers_) {
      if (w->state != WorkerSlot::State::kActive) continue;
      if (!w->pushPending) return;
      ++pushed;
    }
    if (pushed == 0) return;
    bool first = true;
    for (const auto& w : workers_) {
      if (!w->pushPending) continue;
      const float* g = w->in.payload().data();
      if (first) {
        std::copy(g, g + shard_.size(), sum_.begin());
      } else {
        kernels::reduce(sum_.data(), sum_.data(), g, shard_.size(), DataType::kFloat32,
                        RedOp::kSum);
      }
      first = false;
    }
    kernels::divide(sum_.data(), sum_.data(), shard_.size(), DataType::kFloat32,
                    static_cast<uint64_t>(pushed));
    int64_t epochOfStep = 0;
    for (const auto& w : workers_) {
      if (!w->pushPending) continue;
      epochOfStep = w->in.header().epoch;
      record(*w, epochOfStep, version_, true);
    }
    opt_.step(params_.data(), sum_.data());
    ++version_;
    if (rank_ == 0) collector_.step(static_cast<int>(epochOfStep));
    maybeCheckpoint();
    for (auto& w : workers_) {
      if (!w->pushPending) continue;
      w->pushPending = false;
      reply(*w, PsKind::kParams, 0);
      if (w->state == WorkerSlot::State::kActive) post(*w);
    }
  }

  void record(const WorkerSlot& w, int64_t epoch, int64_t base, bool applied) {
    log_.record(rank_, w.rank, epoch, base, version_, applied);
    total_.add(version_ - base, applied);
    if (rank_ == 0) collector_.update(static_cast<int>(epoch), version_ - base, applied);
  }

  void reply(WorkerSlot& w, PsKind kind, int64_t staleness) {
    try {
      if (w.sending) w.link->wait(w.send, "send parameters to a worker", w.out);
      PsHeader h;
      h.kind = kind;
      h.version = version_;
      h.staleness = staleness;
      w.out.setHeader(h);
      std::copy(params_.begin(), params_.end(), w.out.payload().begin());
      w.send = w.link->sendAsync(w.out);
      w.sending = true;
    } catch (const Error& e) {
      lose(w, e);
    }
  }

  void finishSends() {
    for (auto& w : workers_) {
      if (w->state != WorkerSlot::State::kDone || !w->sending) continue;
      try {
        w->link->wait(w->send, "send parameters to a worker", w->out);
      } catch (const Error& e) {
        lose(*w, e);
      }
      w->sending = false;
    }
  }

  /// A worker's link failed. Async: log it naming the worker, go on with the others. Sync: every
  /// step needs every worker, so the job ends.
  void lose(WorkerSlot& w, const Error& e) {
    if (w.state == WorkerSlot::State::kLost) return;
    BRAID_ENFORCE(ctx_.async(), e.code(),
                  "rank {} (server): worker rank {} is gone in --mode sync, whose every step "
                  "needs every worker: {}",
                  rank_, w.rank, e.what());
    const bool wasDone = w.state == WorkerSlot::State::kDone;
    w.state = WorkerSlot::State::kLost;
    w.pushPending = false;
    w.sending = false;
    if (wasDone) return;  // it finished; only its last reply was not confirmed
    collector_.workerLost(w.index);
    std::fprintf(stderr,
                 "braid-train: server rank %d: worker rank %d lost at version %lld (%s); going "
                 "on with %d worker(s)\n",
                 rank_, w.rank, static_cast<long long>(version_), e.what(), active());
    std::fflush(stderr);
    printEpochs();
  }

  /// On this server's failure: every worker still here gets a kServerFailed with the error, so
  /// it ends naming the cause rather than only this server. Then the server waits (3 s at most)
  /// for those workers to leave: a worker that pushes before it reads the notice would otherwise
  /// find this server gone and name that instead. Best effort.
  void tellWorkers(const std::string& error) {
    PsMessage notice(shard_.size());
    PsHeader h;
    h.kind = PsKind::kServerFailed;
    h.peer = rank_;
    notice.setHeader(h);
    notice.setText(error);
    std::vector<WorkerSlot*> told;
    for (auto& w : workers_) {
      if (w->state != WorkerSlot::State::kActive) continue;
      try {
        Request r = w->link->sendAsync(notice);
        r.wait(Deadline::after(2.0));
        if (w->pushPending) post(*w);  // sync: its receive was not posted again yet
        told.push_back(w.get());
      } catch (const Error&) {
        w->link->abort();  // it will see the abort instead
      }
    }
    const Deadline leave = Deadline::after(3.0);
    while (!told.empty() && !leave.expired()) {
      for (auto it = told.begin(); it != told.end();) {
        WorkerSlot& w = **it;
        if (!w.recv.test()) {
          ++it;
        } else if (w.recv.status() != ErrorCode::kOk) {
          it = told.erase(it);  // gone
        } else {
          post(w);  // a message it sent before reading the notice
          ++it;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  void maybeCheckpoint() {
    if (o_.checkpointEvery <= 0 || version_ % o_.checkpointEvery != 0) return;
    int64_t position = -1;  // the slowest active worker's: resuming repeats, never skips
    for (const auto& w : workers_) {
      if (w->state == WorkerSlot::State::kActive && (position < 0 || w->position < position)) {
        position = w->position;
      }
    }
    if (position < 0) return;
    CheckpointState ck;
    ck.fingerprint = serverFingerprint(ctx_);
    ck.step = version_;
    ck.sampler = {static_cast<uint64_t>(position / ctx_.batchesPerEpoch),
                  static_cast<uint64_t>(position % ctx_.batchesPerEpoch)};
    ck.params = params_;
    ck.optimizer = opt_.saveState();
    writeCheckpoint(serverCheckpointDir(o_.checkpointDir, rank_), ck);
  }

  void printEpochs() {
    if (rank_ != 0) return;
    for (EpochStats& s : collector_.takeComplete()) {
      if (ctx_.out) {
        fmt::print(ctx_.out, "{}\n", formatEpoch(s, o_.epochs));
        std::fflush(ctx_.out);
      }
      if (epochLog_) epochLog_->add(s);
    }
  }

  std::unique_ptr<EpochLog> epochLog_;
  PsContext& ctx_;
  const TrainOptions& o_;
  int rank_;
  ShardRange shard_;
  std::vector<float> params_;
  Optimizer opt_;
  int64_t version_ = 0;
  StalenessLog log_;
  EpochCollector collector_;
  StalenessStats total_;
  std::vector<float> sum_;  // sync: the averaged gradient
  std::vector<std::unique_ptr<WorkerSlot>> workers_;
};

}  // namespace

CheckpointFingerprint serverFingerprint(const PsContext& ctx) {
  const TrainOptions& o = ctx.options;
  const ShardRange shard = shardOf(ctx.numParams, ctx.layout.servers, ctx.rank());
  CheckpointFingerprint f;
  // The model's layout and this server's slice of it: another --ps splits differently.
  f.layoutHash = ctx.layoutHash ^ (shard.begin * 0x9E3779B97F4A7C15ull) ^
                 (shard.end * 0xC2B2AE3D27D4EB4Full) ^ static_cast<uint64_t>(ctx.layout.servers);
  f.model = o.model;
  f.ranks = ctx.layout.worldSize;
  f.globalBatch = o.batch;
  f.optimizer = optimizerKindName(o.optimizerOptions().kind);
  f.seed = o.seed;
  f.trainSamples = ctx.trainSamples;
  return f;
}

void runServer(PsContext& ctx, const std::vector<float>& initialParams, const ResumePoint& resume,
               std::unique_ptr<EpochLog> epochLog) {
  Server server(ctx, initialParams, resume);
  server.setEpochLog(std::move(epochLog));
  server.serve();
  const int rank = ctx.rank();
  if (!ctx.options.dumpParams.empty()) {
    // The servers are all alive here (a lost one ended the job), so they may use the world
    // communicator among themselves: each sends its shard to server 0.
    std::vector<ShardRange> shards;
    for (int s = 0; s < ctx.layout.servers; ++s) {
      shards.push_back(shardOf(ctx.numParams, ctx.layout.servers, s));
    }
    std::vector<float> all;  // server 0's: every shard, its own first
    if (rank == 0) {
      all.resize(ctx.numParams);
      std::copy(server.params().begin(), server.params().end(), all.begin());
    }
    gatherFloatsFile(ctx.world, shards, server.params().data(), all.data(), ctx.numParams,
                     ctx.options.dumpParams, "--dump-params");
  }
  if (rank == 0 && ctx.out) {
    const StalenessStats& t = server.total();
    const std::string lost = server.lostRanks();
    fmt::print(ctx.out,
               "braid-train: ps server rank 0: version {}, {} gradient(s) applied (staleness mean "
               "{:.2f}, max {}), {} rejected, workers lost: {}\n",
               server.version(), t.applied, t.mean(), t.max, t.rejected,
               lost.empty() ? "none" : lost);
    std::fflush(ctx.out);
  }
}

}  // namespace braid::trainer::ps
