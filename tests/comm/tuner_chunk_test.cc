// The executor runs in the pieces the tuner chose (BRAID_PICK_CHUNK=1: the tuner also prices
// half and a quarter of the slot for chain, tree and hier): the plan carries the chunk, and ranks
// running chains and trees in those pieces compute what the reference says.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "comm/detail/op_plan.h"
#include "comm/detail/tuner.h"
#include "tests/kit/host_case.h"

namespace braid::testing {
namespace {

comm::Plan planBroadcast(bool pickChunk, size_t count) {
  comm::TunerConfig tuner;
  tuner.nranks = 8;
  tuner.slotBytes = 128 << 10;
  tuner.pickChunk = pickChunk;
  std::vector<float> buf(count);
  comm::OpDesc d;
  d.coll = Collective::kBroadcast;
  d.input = buf.data();
  d.output = buf.data();
  d.count = count;
  d.root = 0;
  return comm::planOp(d, 3, 8, tuner, tuner.slotBytes, 10.0, SIZE_MAX);
}

TEST(TunerChunk, ThePlanRunsInTheChunkTheTunerChose) {
  // 256 KiB broadcast on 8 ranks: a chain; with smaller pieces its pipeline fills sooner
  // (braid-topo -n 8 --pick-chunk --collective broadcast: chain, 32K).
  const size_t count = 65536;
  const comm::Plan slot = planBroadcast(false, count);
  EXPECT_EQ(slot.spec.family, Algorithm::kChain);
  EXPECT_EQ(slot.args.elemsPerPiece, (128u << 10) / 4);
  EXPECT_EQ(slot.args.header.pieceBytes, 128u << 10);
  const comm::Plan picked = planBroadcast(true, count);
  EXPECT_EQ(picked.spec.family, Algorithm::kChain);
  EXPECT_LT(picked.args.elemsPerPiece, slot.args.elemsPerPiece);
  EXPECT_EQ(picked.spec.elemsPerPiece, picked.args.elemsPerPiece);
  EXPECT_EQ(picked.args.header.pieceBytes, picked.args.elemsPerPiece * 4);
  comm::TunerConfig tuner;
  tuner.nranks = 8;
  tuner.pickChunk = true;
  EXPECT_EQ(picked.args.elemsPerPiece * 4,
            comm::choose(tuner, Collective::kBroadcast, count * 4).chunkBytes);
}

// Chains (broadcast, reduce), trees and rings on 8 ranks as threads, each rank with
// BRAID_PICK_CHUNK=1 (read when a communicator is made), checked element by element.
TEST(TunerChunk, CollectivesInTheChosenPiecesMatchTheReference) {
  ASSERT_EQ(setenv("BRAID_PICK_CHUNK", "1", 1), 0);
  std::vector<CollectiveCase> cases;
  for (Collective coll : {Collective::kBroadcast, Collective::kReduce, Collective::kAllReduce}) {
    for (size_t count : {size_t(65536), size_t(65536 + 13), size_t(300007)}) {
      for (bool inPlace : {false, true}) {
        cases.push_back({coll, DataType::kFloat32, RedOp::kSum, count, inPlace, 5});
      }
    }
  }
  Options options;
  options.timeoutSeconds = 60;
  runCasesOnThreads(8, [&](int) { return options; }, cases);
  unsetenv("BRAID_PICK_CHUNK");
}

}  // namespace
}  // namespace braid::testing
