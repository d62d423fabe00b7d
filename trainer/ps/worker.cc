#include "trainer/ps/worker.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "common/error.h"
#include "trainer/data/sampler.h"
#include "trainer/ps/epoch_collector.h"
#include "trainer/train/batch_step.h"
#include "trainer/train/seconds.h"

namespace braid::trainer::ps {
namespace {

/// One server as a worker sees it.
struct ServerSlot {
  int rank = 0;
  PsLink* link = nullptr;
  ShardRange shard;
  PsMessage out, in;
  int64_t version = 0;  // of the parameters this worker holds of the shard
  ServerSlot(ShardRange r) : shard(r), out(r.size()), in(r.size()) {}
};

class Worker {
 public:
  Worker(PsContext& ctx, Model& model) : ctx_(ctx), model_(model), rank_(ctx.rank()) {
    for (int s = 0; s < ctx.layout.servers; ++s) {
      auto slot = std::make_unique<ServerSlot>(shardOf(ctx.numParams, ctx.layout.servers, s));
      slot->rank = s;
      slot->link = &ctx.links.to(s);
      servers_.push_back(std::move(slot));
    }
  }

  /// Sends `kind` (with the shard of `grads` as payload when given) to each server in `to`, then
  /// takes each one's reply; returns the servers whose reply was kRejected.
  std::vector<int> exchange(PsKind kind, const std::vector<int>& to, const float* grads,
                            SamplerState position) {
    std::vector<Request> sends, recvs;
    for (int s : to) {
      ServerSlot& slot = *servers_[s];
      PsHeader h;
      h.kind = kind;
      h.version = slot.version;
      h.epoch = static_cast<int64_t>(position.epoch);
      h.batch = static_cast<int64_t>(position.batch);
      slot.out.setHeader(h);
      if (grads) {
        std::copy(grads + slot.shard.begin, grads + slot.shard.end, slot.out.payload().begin());
      }
      recvs.push_back(guard(slot, [&] { return slot.link->recvAsync(slot.in); }));
      sends.push_back(guard(slot, [&] { return slot.link->sendAsync(slot.out); }));
    }
    std::vector<int> rejected;
    float* params = model_.store.params();
    for (size_t i = 0; i < to.size(); ++i) {
      ServerSlot& slot = *servers_[to[i]];
      guard(slot, [&] {
        slot.link->wait(recvs[i], "receive parameters from a server", slot.in);
        slot.link->wait(sends[i], "send to a server", slot.out);
        return 0;
      });
      const PsHeader r = slot.in.header();
      if (r.kind == PsKind::kServerFailed) serverFailed(slot, slot.in.text());
      BRAID_ENFORCE(r.kind == PsKind::kParams || r.kind == PsKind::kRejected,
                    ErrorCode::kInvalidUsage,
                    "rank {} (worker): unexpected reply '{}' from server rank {}", rank_,
                    psKindName(r.kind), slot.rank);
      std::copy(slot.in.payload().begin(), slot.in.payload().end(), params + slot.shard.begin);
      slot.version = r.version;
      if (r.kind == PsKind::kRejected) rejected.push_back(to[i]);
    }
    return rejected;
  }

  /// Sends `kind` to server `s` without a reply (epoch stats, done).
  void notify(int s, const PsHeader& h) {
    ServerSlot& slot = *servers_[s];
    slot.out.setHeader(h);
    guard(slot, [&] {
      Request r = slot.link->sendAsync(slot.out);
      slot.link->wait(r, "send to a server", slot.out);
      return 0;
    });
  }

  void run(const Dataset& train, const Dataset& test) {
    const TrainOptions& o = ctx_.options;
    const int index = ctx_.layout.workerIndex(rank_), workers = ctx_.layout.workers();
    DistributedSampler sampler(o.samplerOptions(train.count, index, workers));
    const int64_t perEpoch = ctx_.batchesPerEpoch;
    int64_t position = ctx_.startPosition;
    const std::vector<int> everyServer = allServers();
    exchange(PsKind::kPull, everyServer, nullptr, {});

    StepBuffers buffers;
    std::vector<int64_t> indices;
    bool stop = o.maxSteps > 0 && position >= o.maxSteps;
    for (int epoch = static_cast<int>(position / perEpoch); epoch < o.epochs && !stop; ++epoch) {
      // The first epoch of a resumed run starts mid-way; the others at batch 0.
      sampler.restore({static_cast<uint64_t>(epoch),
                       static_cast<uint64_t>(position - static_cast<int64_t>(epoch) * perEpoch)});
      BatchSums sums;
      double waitSeconds = 0, computeSeconds = 0;
      const auto epochStart = Clock::now();
      while (sampler.next(indices)) {
        std::vector<int> to = everyServer;
        BatchSums scratch;  // a recomputation after a rejection is not counted twice
        for (bool first = true; !to.empty(); first = false) {
          const auto c0 = Clock::now();
          model_.store.zeroGrads();
          forwardBackward(model_, train, indices, o.accum, 1.0f, {}, buffers,
                          first ? sums : scratch);
          computeSeconds += secondsSince(c0);
          const auto t0 = Clock::now();
          to = exchange(PsKind::kPush, to, model_.store.grads(), sampler.state());
          waitSeconds += secondsSince(t0);
        }
        ++position;
        if (o.maxSteps > 0 && position >= o.maxSteps) {
          stop = true;
          break;
        }
      }
      const double seconds = secondsSince(epochStart);
      exchange(PsKind::kPull, everyServer, nullptr, {});  // evaluate the servers' parameters
      const EvalCounts eval = countCorrect(model_, test, index, workers);
      PsHeader h;
      h.kind = PsKind::kEpochStats;
      h.epoch = epoch;
      WorkerEpoch{sums, eval.correct, eval.seen, seconds, waitSeconds, computeSeconds}.toStats(
          h.stats);
      notify(0, h);
    }
    PsHeader done;
    done.kind = PsKind::kDone;
    for (int s : everyServer) notify(s, done);
  }

 private:
  std::vector<int> allServers() const {
    std::vector<int> all(servers_.size());
    for (size_t s = 0; s < all.size(); ++s) all[s] = static_cast<int>(s);
    return all;
  }

  /// Runs `f` on `slot`'s link; a failure there means the server is gone.
  template <typename F>
  auto guard(ServerSlot& slot, F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const Error& e) {
      serverLost(slot, e);
    }
  }

  /// Server `lost` is gone (seen on its link): tell the other servers, so they end too instead
  /// of waiting for this worker, then fail naming it.
  [[noreturn]] void serverLost(ServerSlot& lost, const Error& e) {
    tellOtherServers(lost.rank);
    fail(e.code(),
         "rank {} (worker): server rank {} is gone; the job cannot go on without its "
         "shard: {}",
         rank_, lost.rank, e.what());
  }

  /// Server `failed` ended the job with `error` (which names the cause).
  [[noreturn]] void serverFailed(ServerSlot& failed, const std::string& error) {
    tellOtherServers(failed.rank);
    fail(ErrorCode::kRemoteError, "rank {} (worker): server rank {} ended the job: {}", rank_,
         failed.rank, error);
  }

  /// kServerLost naming `lost` to every other server.
  void tellOtherServers(int lost) {
    for (auto& s : servers_) {
      if (s->rank == lost) continue;
      try {
        PsMessage notice(s->shard.size());
        PsHeader h;
        h.kind = PsKind::kServerLost;
        h.peer = lost;
        notice.setHeader(h);
        Request r = s->link->sendAsync(notice);
        r.wait(Deadline::after(2.0));
      } catch (const Error&) {
        // that one is gone too, or ending: it will see this worker leave
      }
    }
  }

  PsContext& ctx_;
  Model& model_;
  int rank_;
  std::vector<std::unique_ptr<ServerSlot>> servers_;
};

}  // namespace

void runWorker(PsContext& ctx, Model& model, const Dataset& train, const Dataset& test) {
  Worker(ctx, model).run(train, test);
}

}  // namespace braid::trainer::ps
