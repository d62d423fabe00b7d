// The parameter server's pure parts: shards balanced by bytes, the epoch collector, the message
// header's round trip.
#include <gtest/gtest.h>

#include "trainer/ps/epoch_collector.h"
#include "trainer/ps/layout.h"
#include "trainer/ps/message.h"

namespace braid::trainer::ps {
namespace {

TEST(PsLayout, ShardsAreContiguousAndBalancedByBytes) {
  for (size_t n : {1ul, 7ul, 235146ul, 1000000ul}) {
    for (int servers = 1; servers <= 7; ++servers) {
      if (static_cast<size_t>(servers) > n) continue;
      size_t next = 0, smallest = n, largest = 0;
      for (int s = 0; s < servers; ++s) {
        const ShardRange r = shardOf(n, servers, s);
        EXPECT_EQ(r.begin, next) << "n " << n << " servers " << servers << " shard " << s;
        next = r.end;
        smallest = std::min(smallest, r.size());
        largest = std::max(largest, r.size());
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(largest - smallest, 1u) << "n " << n << " servers " << servers;
    }
  }
  const PsLayout layout{2, 5};
  EXPECT_TRUE(layout.isServer(1));
  EXPECT_FALSE(layout.isServer(2));
  EXPECT_EQ(layout.workers(), 3);
  EXPECT_EQ(layout.workerIndex(4), 2);
  EXPECT_EQ(layout.workerRank(0), 2);
}

TEST(PsMessage, HeaderAndPayloadRoundTrip) {
  PsMessage m(5);
  EXPECT_EQ(m.bytes(), sizeof(PsHeader) + 5 * sizeof(float));
  PsHeader h;
  h.kind = PsKind::kPush;
  h.version = 41;
  h.epoch = 3;
  h.batch = 7;
  h.stats[7] = 2.5;
  m.setHeader(h);
  m.payload()[4] = 1.25f;
  const PsHeader back = m.header();
  EXPECT_EQ(back.kind, PsKind::kPush);
  EXPECT_EQ(back.version, 41);
  EXPECT_EQ(back.batch, 7);
  EXPECT_EQ(back.stats[7], 2.5);
  EXPECT_EQ(m.payload()[4], 1.25f);
  EXPECT_STREQ(psKindName(PsKind::kServerLost), "server lost");
}

WorkerEpoch report(double samples, double seconds) {
  return WorkerEpoch{
      {samples * 0.5, samples / 2, samples}, 10, 20, seconds, seconds / 4, seconds / 2};
}

TEST(EpochCollector, AnEpochIsCompleteWhenEveryWorkerReportedOrIsGone) {
  EpochCollector c(3);
  c.update(0, 2, true);
  c.update(0, 4, true);
  c.update(0, 9, false);
  c.step(0);
  c.step(0);
  c.report(0, 0, report(100, 2));
  c.report(2, 0, report(100, 4));
  EXPECT_TRUE(c.takeComplete().empty()) << "worker 1 has not reported epoch 1";
  c.report(1, 1, report(50, 1));  // a later epoch first: still waits for epoch 1
  EXPECT_TRUE(c.takeComplete().empty());
  c.workerLost(1);
  const std::vector<EpochStats> done = c.takeComplete();
  ASSERT_EQ(done.size(), 1u);
  const EpochStats& s = done[0];
  EXPECT_EQ(s.epoch, 1);
  EXPECT_EQ(s.steps, 2);
  EXPECT_DOUBLE_EQ(s.trainLoss, 0.5);
  EXPECT_DOUBLE_EQ(s.testAcc, 0.5);
  EXPECT_DOUBLE_EQ(s.samplesPerSec, 200.0 / 4);  // the slowest worker's time
  EXPECT_DOUBLE_EQ(s.commWaitShare, 0.25);       // each worker waited a quarter of its time
  // The performance monitor's fields, summed over the workers that reported (2 s and 4 s).
  ASSERT_TRUE(s.times.has_value());
  EXPECT_EQ(s.times->steps, 2);
  EXPECT_EQ(s.times->samples, 200);
  EXPECT_DOUBLE_EQ(s.times->stepSeconds, 6.0);
  EXPECT_DOUBLE_EQ(s.times->computeSeconds, 3.0);
  EXPECT_DOUBLE_EQ(s.times->waitSeconds, 1.5);
  EXPECT_DOUBLE_EQ(s.times->overlapSeconds, 0.0);
  EXPECT_EQ(s.times->allReduceBytes, 0);
  EXPECT_NE(s.extraConsole.find("staleness mean 3.00 max 4  rejected 1  workers 2"),
            std::string::npos)
      << s.extraConsole;
  EXPECT_NE(s.extraJson.find("\"staleness_max\":4"), std::string::npos) << s.extraJson;
  // Epoch 2: worker 1 reported before it was lost, the others now.
  c.report(0, 1, report(50, 1));
  EXPECT_TRUE(c.takeComplete().empty());
  c.report(2, 1, report(50, 1));
  ASSERT_EQ(c.takeComplete().size(), 1u);
  EXPECT_TRUE(c.takeComplete().empty()) << "each epoch comes out once";
}

TEST(EpochCollector, WorkerReportsRoundTripThroughTheHeader) {
  double stats[8];
  report(100, 2).toStats(stats);
  const WorkerEpoch back = WorkerEpoch::fromStats(stats);
  EXPECT_DOUBLE_EQ(back.train.samples, 100);
  EXPECT_DOUBLE_EQ(back.seconds, 2);
  EXPECT_DOUBLE_EQ(back.waitSeconds, 0.5);
  EXPECT_DOUBLE_EQ(back.computeSeconds, 1);
}

}  // namespace
}  // namespace braid::trainer::ps
