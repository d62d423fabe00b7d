#include "trainer/train/rank_sums.h"

namespace braid::trainer {

BatchSums sumOverRanks(Communicator& comm, const BatchSums& mine) {
  double total[3] = {mine.lossTimesSamples, mine.correct, mine.samples};
  comm.allReduce(total, total, 3, DataType::kFloat64, RedOp::kSum);
  return BatchSums{total[0], total[1], total[2]};
}

double accuracyOverRanks(Communicator& comm, const EvalCounts& mine) {
  double counts[2] = {mine.correct, mine.seen};
  comm.allReduce(counts, counts, 2, DataType::kFloat64, RedOp::kSum);
  return counts[1] > 0 ? counts[0] / counts[1] : 0.0;
}

}  // namespace braid::trainer
