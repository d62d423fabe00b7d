// The pipeline schedules as data: their operation lists, and the verifier that proves them
// (matching sends and receives, no deadlock, the bubble they give) or names what is wrong.
#include "trainer/pipeline/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.h"
#include "trainer/pipeline/schedule_verifier.h"

namespace braid::trainer {
namespace {

TEST(PipelineSchedule, GpipeFillsThenDrainsNewestFirst) {
  const auto ops = pipelineOps(PipelineSchedule::kGpipe, 2, 4);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(formatOps(ops[0]), "F0 F1 F2 F3 B3 B2 B1 B0");
  EXPECT_EQ(formatOps(ops[1]), "F0 F1 F2 F3 B3 B2 B1 B0");
}

TEST(PipelineSchedule, OneForwardOneBackwardAfterWarmup) {
  const auto ops = pipelineOps(PipelineSchedule::k1f1b, 4, 6);
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(formatOps(ops[0]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(formatOps(ops[1]), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  EXPECT_EQ(formatOps(ops[2]), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(formatOps(ops[3]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer micro-batches than the warm-up: all forwards, then all backwards.
  EXPECT_EQ(formatOps(stageOps(PipelineSchedule::k1f1b, 4, 2, 0)), "F0 F1 B0 B1");
}

// Every schedule for 1..6 stages and 1..12 micro-batches: the sends of each stage match the
// next stage's receives in order, nothing deadlocks, the simulated bubble with equal stages is
// the textbook (S-1)/(M+S-1) for both backward costs, and 1F1B keeps at most S - s micro-batches
// in flight on stage s where GPipe keeps all M.
TEST(PipelineSchedule, VerifierProvesBothSchedules) {
  for (PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::k1f1b}) {
    for (int stages = 1; stages <= 6; ++stages) {
      for (int micros = 1; micros <= 12; ++micros) {
        const auto ops = pipelineOps(schedule, stages, micros);
        for (double backwardCost : {1.0, 2.0}) {
          const PipelineCheck check = verifyPipeline(ops, micros, 1.0, backwardCost);
          SCOPED_TRACE(testing::Message() << pipelineScheduleName(schedule) << " S=" << stages
                                          << " M=" << micros << " B=" << backwardCost);
          ASSERT_EQ(check.error, "");
          EXPECT_NEAR(check.bubble, expectedBubble(stages, micros), 1e-12);
          EXPECT_DOUBLE_EQ(check.makespan, (micros + stages - 1) * (1.0 + backwardCost));
          for (int s = 0; s < stages; ++s) {
            const int expected =
                schedule == PipelineSchedule::kGpipe ? micros : std::min(stages - s, micros);
            EXPECT_EQ(check.peakInFlight[static_cast<size_t>(s)], expected) << "stage " << s;
          }
        }
      }
    }
  }
}

TEST(PipelineSchedule, VerifierNamesOutOfOrderMessages) {
  auto ops = pipelineOps(PipelineSchedule::kGpipe, 3, 4);
  std::swap(ops[1][0], ops[1][1]);  // stage 1 forwards micro-batch 1 before 0
  EXPECT_EQ(verifyPipeline(ops, 4).error,
            "stage 1: forward of micro-batch 1 receives micro-batch 0's activation from stage 0");

  // Stage 0 takes gradients newest first (GPipe's order), stage 1 sends them oldest first.
  auto mixed = pipelineOps(PipelineSchedule::kGpipe, 2, 3);
  mixed[1] = stageOps(PipelineSchedule::k1f1b, 2, 3, 1);
  EXPECT_EQ(verifyPipeline(mixed, 3).error,
            "stage 0: backward of micro-batch 2 receives micro-batch 0's gradient from stage 1");
}

TEST(PipelineSchedule, VerifierFindsDeadlock) {
  // Stage 0 waits for micro-batch 0's gradient before sending micro-batch 1's activation, which
  // stage 1 needs before it backpropagates micro-batch 0.
  std::vector<std::vector<StageOp>> ops = {{{StageOp::kForward, 0},
                                            {StageOp::kBackward, 0},
                                            {StageOp::kForward, 1},
                                            {StageOp::kBackward, 1}},
                                           {{StageOp::kForward, 0},
                                            {StageOp::kForward, 1},
                                            {StageOp::kBackward, 0},
                                            {StageOp::kBackward, 1}}};
  EXPECT_EQ(verifyPipeline(ops, 2).error,
            "deadlock; stage 0 at B0 waits for the gradient of micro-batch 0 from stage 1; "
            "stage 1 at F1 waits for the activation of micro-batch 1 from stage 0");
}

TEST(PipelineSchedule, VerifierChecksEachStageList) {
  auto ops = pipelineOps(PipelineSchedule::k1f1b, 2, 3);
  ops[1].pop_back();
  EXPECT_EQ(verifyPipeline(ops, 3).error, "stage 1: micro-batch 2 has no backward");
  ops = pipelineOps(PipelineSchedule::k1f1b, 2, 3);
  std::swap(ops[1][0], ops[1][1]);
  EXPECT_EQ(verifyPipeline(ops, 3).error, "stage 1: backward of micro-batch 0 before its forward");
  ops = pipelineOps(PipelineSchedule::kGpipe, 2, 3);
  ops[0][2] = ops[0][1];
  EXPECT_EQ(verifyPipeline(ops, 3).error, "stage 0: forward of micro-batch 1 appears twice");
}

TEST(PipelineSchedule, NamesAndBadArguments) {
  EXPECT_EQ(parsePipelineSchedule("gpipe"), PipelineSchedule::kGpipe);
  EXPECT_EQ(parsePipelineSchedule("1f1b"), PipelineSchedule::k1f1b);
  try {
    parsePipelineSchedule("zigzag");
    FAIL() << "accepted an unknown schedule";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--schedule 'zigzag' is unknown"), std::string::npos);
  }
  EXPECT_THROW(stageOps(PipelineSchedule::kGpipe, 2, 4, 2), Error);
  EXPECT_THROW(stageOps(PipelineSchedule::k1f1b, 2, 0, 0), Error);
  EXPECT_DOUBLE_EQ(expectedBubble(2, 4), 0.2);
}

}  // namespace
}  // namespace braid::trainer
