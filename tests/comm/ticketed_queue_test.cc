// The op queue as the device communicator drives it (Medium::callersRun false: calls are
// admitted with tickets, only the progress thread runs ops, beforeRun/finished around each), over
// host memory and shm so that it runs without a GPU: every shared part of the device path but
// the CUDA piece engine and the stream wait. Ranks are threads.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/detail/state.h"
#include "comm/device/ticket_order.h"
#include "comm/exec/host_pieces.h"
#include "tests/kit/alltoallv_case.h"
#include "tests/kit/reference.h"
#include "tests/kit/threads.h"
#include "tests/transport/test_support.h"

namespace braid {
namespace {

using comm::OpDesc;

/// The device medium's shape over host memory: tickets at admission, streams released in ticket
/// order (here: a counter callers wait on), and a record of what ran when.
class TicketedHostMedium final : public comm::Medium {
 public:
  explicit TicketedHostMedium(int rank) : host_(rank) {}
  void checkBuffers(const OpDesc& d, size_t in, size_t out) const override {
    host_.checkBuffers(d, in, out);
  }
  void* scratchIn() override { return &scratch_[0]; }
  void* scratchOut() override { return &scratch_[1]; }
  bool callersRun() const override { return false; }
  bool planAtCall() const override { return true; }
  void progressThreadStarted() override { progressThread_ = std::this_thread::get_id(); }
  void beforeRun(uint64_t ticket, const std::atomic<bool>& aborted) override {
    (void)aborted;
    EXPECT_EQ(std::this_thread::get_id(), progressThread_) << "only the progress thread runs ops";
    std::lock_guard<std::mutex> lock(mutex_);
    ran_.push_back(ticket);
    if (ticket == failBefore_)
      fail(ErrorCode::kCudaError, "injected failure before ticket {}", ticket);
  }
  void finished(uint64_t ticket) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++finishes_[ticket];
    order_.finish(ticket);
    cv_.notify_all();
  }
  uint64_t admit() {
    std::lock_guard<std::mutex> lock(mutex_);
    return ++admitted_;
  }
  /// Waits until every admitted ticket finished (as a stream passes its wait); false after 30 s.
  bool waitAll() {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return order_.done() == admitted_; });
  }
  std::vector<uint64_t> ran() {
    std::lock_guard<std::mutex> lock(mutex_);
    return ran_;
  }
  std::map<uint64_t, int> finishes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return finishes_;
  }
  void failBefore(uint64_t ticket) { failBefore_ = ticket; }

 private:
  comm::HostMedium host_;
  uint8_t scratch_[2] = {0, 0};
  std::thread::id progressThread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t admitted_ = 0;
  uint64_t failBefore_ = 0;
  comm::device::InOrderTickets order_;
  std::vector<uint64_t> ran_;
  std::map<uint64_t, int> finishes_;
};

struct Rank {
  std::shared_ptr<CommState> core;
  TicketedHostMedium* medium = nullptr;

  void submit(const OpDesc& d) {
    core->submitTicketed(d, [&] { return medium->admit(); });
  }
};

/// Runs `fn` on n thread-ranks, each with a ticketed core over shm.
void runTicketedRanks(int n, const Options& options, const std::function<void(Rank&)>& fn) {
  static std::atomic<int> jobs{0};
  const std::string job = fmt::format("ticketed-{}-{}", getpid(), jobs++);
  transport::testing::MemoryKeyValue kv;
  auto errors = testing::runThreads(n, [&](int r) {
    const ResolvedOptions resolved = resolveOptions(options);
    auto medium = std::make_unique<TicketedHostMedium>(r);
    Rank rank;
    rank.medium = medium.get();
    rank.core = CommState::make(r, n, resolved, std::move(medium));
    rank.core->nodeOf.assign(n, 0);
    transport::EndpointConfig config;
    config.rank = r;
    config.size = n;
    config.peerKinds.assign(n, transport::Kind::kShm);
    config.peerKinds[r] = transport::Kind::kSelf;
    config.channels = resolved.channels;
    config.slots = resolved.slots;
    config.slotBytes = resolved.slotBytes;
    config.jobId = job;
    config.timeoutSeconds = resolved.timeoutSeconds;
    rank.core->start(transport::connect(config, kv), std::make_unique<comm::HostPieces>(),
                     /*oversubscribed=*/true);
    fn(rank);
    EXPECT_TRUE(rank.medium->waitAll()) << "rank " << r << ": a ticket never finished";
  });
  for (auto& e : errors) EXPECT_FALSE(e) << testing::errorText(e);
}

OpDesc op(Collective coll, const void* in, void* out, size_t count, RedOp redOp = RedOp::kSum,
          int root = -1) {
  OpDesc d;
  d.coll = coll;
  d.input = in;
  d.output = out;
  d.count = count;
  d.op = redOp;
  d.root = root;
  return d;
}

/// One call of a collective on rank r of n with the kit's inputs (float32 sum data), queued by
/// submit() and checked against the kit's reference once its ticket finished.
struct Call {
  Collective coll;
  size_t count;
  int root;
  std::vector<char> in, out;

  Call(Collective c, size_t n_, int n, int r, int root_) : coll(c), count(n_), root(root_) {
    in = testing::rankInput(c, DataType::kFloat32, RedOp::kSum, count, n, r);
    out.assign(testing::outputCount(c, count, n) * sizeof(float), 0);
  }
  OpDesc desc() { return op(coll, in.data(), out.data(), count, RedOp::kSum, root); }
  void expectReference(int n, int r) const {
    const auto want =
        testing::expectedOutput(coll, DataType::kFloat32, RedOp::kSum, count, n, r, root);
    if (want.empty()) return;  // a non-root's reduce or gather output is not defined
    EXPECT_EQ(testing::firstMismatch(out.data(), want.data(), want.size() / sizeof(float),
                                     sizeof(float)),
              -1)
        << "rank " << r << ": " << collectiveName(coll) << " of " << count << ", root " << root;
  }
};

TEST(TicketedQueue, QueuedCollectivesRunInTicketOrderAndMatchTheReference) {
  const std::vector<size_t> counts = {1, 7, 0, 1031, 40000, 3};
  const std::vector<Collective> colls = {Collective::kAllReduce, Collective::kReduceScatter,
                                         Collective::kAllGather, Collective::kBroadcast,
                                         Collective::kReduce};
  for (int n : {1, 2, 3, 4}) {
    SCOPED_TRACE(fmt::format("{} ranks", n));
    runTicketedRanks(n, Options{}, [&](Rank& rank) {
      const int r = rank.core->rank;
      std::vector<Call> calls;
      for (size_t count : counts) {
        for (Collective c : colls) calls.emplace_back(c, count, n, r, n - 1);
      }
      // Everything is submitted before anything is waited for, as a stream-ordered caller does.
      size_t queued = 0;
      for (Call& c : calls) {
        rank.submit(c.desc());
        if (c.count > 0) ++queued;
      }
      ASSERT_TRUE(rank.medium->waitAll());
      const std::vector<uint64_t> ran = rank.medium->ran();
      ASSERT_EQ(ran.size(), queued) << "count 0 queues nothing";
      for (size_t i = 0; i < ran.size(); ++i) EXPECT_EQ(ran[i], i + 1) << "in ticket order";
      for (auto& [ticket, times] : rank.medium->finishes()) EXPECT_EQ(times, 1) << ticket;
      for (const Call& c : calls) c.expectReference(n, r);
    });
  }
}

// All-to-all, gather and scatter queued as the device path queues them, then an allToAllv in
// which rank 0 sends nothing (its call's count, the sum of its send counts, is 0) but receives
// from every other rank: it must still run there, as on the host path. (It was dropped as "moves
// nothing": rank 0's output stayed unwritten and its peers timed out in the completion exchange.)
TEST(TicketedQueue, ExchangesRunAndAnAllToAllvThatSendsNothingStillRuns) {
  Options options;
  options.timeoutSeconds = 10;
  for (int n : {2, 3}) {
    SCOPED_TRACE(fmt::format("{} ranks", n));
    runTicketedRanks(n, options, [&](Rank& rank) {
      const int r = rank.core->rank;
      std::vector<Call> calls;
      for (Collective c : testing::kExchangeCollectives) {
        for (int root : {0, n - 1}) calls.emplace_back(c, 1031, n, r, root);
      }
      for (Call& c : calls) rank.submit(c.desc());
      // Rank q sends 100 + 10 p + q elements to rank p, rank 0 nothing.
      testing::AllToAllvCase v(r, n, [](int from, int to) {
        return from == 0 ? size_t(0) : size_t(100 + 10 * to + from);
      });
      rank.submit(comm::allToAllvOp(v.in.data(), v.sendCounts.data(), v.sendDispls.data(),
                                    v.out.data(), v.recvCounts.data(), v.recvDispls.data(),
                                    DataType::kFloat32, r, n));
      ASSERT_TRUE(rank.medium->waitAll());
      EXPECT_EQ(rank.medium->ran().size(), calls.size() + 1) << "rank " << r;
      for (const Call& c : calls) c.expectReference(n, r);
      EXPECT_EQ(v.check("rank 0 sends nothing"), "");
      std::lock_guard<std::mutex> lock(rank.core->errorMutex);
      EXPECT_FALSE(rank.core->broken.has_value()) << rank.core->broken->what();
    });
  }
}

TEST(TicketedQueue, AForcedAlgorithmThatCannotRunIsAUsageErrorAtTheCall) {
  Options options;
  options.algorithm = Algorithm::kChain;  // runs broadcast only
  runTicketedRanks(2, options, [&](Rank& rank) {
    std::vector<float> buf(64, 1.0f);
    try {
      rank.submit(op(Collective::kAllReduce, buf.data(), buf.data(), buf.size()));
      ADD_FAILURE() << "chain all-reduce accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage) << e.what();
    }
    EXPECT_TRUE(rank.medium->ran().empty()) << "nothing was queued";
    // Nothing was numbered either: the next call matches on both ranks.
    rank.submit(op(Collective::kBroadcast, buf.data(), buf.data(), buf.size(), RedOp::kSum, 0));
    ASSERT_TRUE(rank.medium->waitAll());
    std::lock_guard<std::mutex> lock(rank.core->errorMutex);
    EXPECT_FALSE(rank.core->broken.has_value());
  });
}

TEST(TicketedQueue, AFailureBeforeAnOpFinishesEveryTicketAndBreaksEveryRank) {
  Options options;
  options.timeoutSeconds = 10;
  runTicketedRanks(3, options, [&](Rank& rank) {
    const int r = rank.core->rank;
    if (r == 1) rank.medium->failBefore(2);
    std::vector<std::vector<float>> bufs(6, std::vector<float>(1000, float(r)));
    for (auto& b : bufs) rank.submit(op(Collective::kAllReduce, b.data(), b.data(), b.size()));
    ASSERT_TRUE(rank.medium->waitAll()) << "every caller's stream is released";
    for (auto& [ticket, times] : rank.medium->finishes()) EXPECT_EQ(times, 1) << ticket;
    EXPECT_EQ(rank.medium->finishes().size(), bufs.size());
    for (float v : bufs[0]) ASSERT_EQ(v, 3.0f) << "the first all-reduce ran before the failure";
    std::optional<Error> broken;
    {
      std::lock_guard<std::mutex> lock(rank.core->errorMutex);
      broken = rank.core->broken;
    }
    ASSERT_TRUE(broken.has_value()) << "rank " << r << " did not hear of the failure";
    if (r == 1) {
      EXPECT_EQ(broken->code(), ErrorCode::kCudaError) << broken->what();
    } else {
      EXPECT_EQ(broken->code(), ErrorCode::kRemoteError) << broken->what();
      EXPECT_NE(std::string(broken->what()).find("rank 1"), std::string::npos) << broken->what();
    }
    try {
      rank.submit(op(Collective::kAllReduce, bufs[0].data(), bufs[0].data(), 4));
      ADD_FAILURE() << "a broken communicator took a call";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), broken->code()) << e.what();
    }
  });
}

TEST(TicketedQueue, AbortFinishesEveryTicketWithoutRunningTheRest) {
  runTicketedRanks(2, Options{}, [&](Rank& rank) {
    std::vector<float> buf(100, 1.0f);
    if (rank.core->rank == 0) {
      // The peer never calls: the first op waits until abort, the others never start.
      for (int i = 0; i < 4; ++i)
        rank.submit(op(Collective::kAllReduce, buf.data(), buf.data(), buf.size()));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      rank.core->abort("the test aborts");
      ASSERT_TRUE(rank.medium->waitAll());
      EXPECT_LE(rank.medium->ran().size(), 1u);
      EXPECT_THROW(rank.submit(op(Collective::kAllReduce, buf.data(), buf.data(), 4)), Error);
    }
  });
}

}  // namespace
}  // namespace braid
