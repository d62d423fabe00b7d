// One training step of one pipeline stage: its schedule's forward and backward operations over
// the micro-batches, with activations and gradients exchanged with the neighbouring stages.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "braid/braid.hpp"
#include "trainer/nn/loss.h"
#include "trainer/nn/models.h"
#include "trainer/pipeline/schedule.h"
#include "trainer/pipeline/send_pump.h"
#include "trainer/pipeline/stage_layout.h"
#include "trainer/train/batch_sums.h"

namespace braid::trainer {

/// What one step of a stage did. Loss sums are the last stage's (0 elsewhere).
struct StageStepStats {
  BatchSums sums;               ///< loss x samples, correct, samples over the micro-batches
  double seconds = 0;           ///< wall time of the step's pipeline phase (to the last send)
  double computeSeconds = 0;    ///< in layer and loss math (recomputation included)
  double recomputeSeconds = 0;  ///< of which re-running forwards (see StageStep)
  double waitSeconds = 0;       ///< blocked in Request::wait on receives and sends
};

/// Fills micro-batch `micro`'s input images ([n, inputShape...]) and labels.
using MicroBatchLoader =
    std::function<void(int micro, Tensor& images, std::vector<int32_t>& labels)>;

/// Runs a stage (layers [firstLayer, lastLayer) of `model`) through the operation lists of
/// schedule.h. A receive (tag = the micro-batch) is posted when the operation that needs it
/// comes up, and every send is handed to a SendPump (one per neighbour) that drives it while the
/// stage computes: no stage ever blocks on a send, which is what verifyPipeline assumes, so its
/// proof is all that is needed against deadlock. Each wait has a deadline of 2 x BRAID_TIMEOUT.
/// (Receives are not posted ahead: a thread running braid's point-to-point group asleep on
/// a pending receive admits newly posted sends only after its 20 ms sleep slice, which stalled
/// the first activation of every step by ~20 ms.)
///
/// Layers keep the state of their last forward only, so a backward whose micro-batch is not the
/// stage's last forward first re-runs that forward from the kept stage input (GPipe's
/// re-materialisation): gpipe re-runs M-1 of the M forwards on every stage, 1f1b nearly all on
/// every stage but the last (whose forward and backward of a micro-batch are adjacent). The
/// re-run leaves the batch-norm running statistics as they were (saved and restored around it)
/// and computes the same floats (the same input and batch statistics).
/// The last stage computes the loss; its gradient is scaled by 1/M, so the accumulated gradient
/// is the mean over the pipeline's batch, as one rank with the whole batch.
class StageStep {
 public:
  StageStep(Communicator& world, Model& model, const PipelineLayout& layout, size_t firstLayer,
            size_t lastLayer, std::vector<int> inputShape, std::vector<int> outputShape);

  /// One step: `ops` (stageOps for this stage) over `micros` micro-batches of `microSize`
  /// samples. `load` is called on the first and the last stage for each micro-batch. Adds the
  /// gradients into the model's store (zero them before). Throws braid::Error naming this rank,
  /// the peer, the operation, the micro-batch and the size when a transfer fails or times out.
  StageStepStats run(const std::vector<StageOp>& ops, int micros, int microSize,
                     const MicroBatchLoader& load);

  /// Evaluation of one batch of `n` samples (eval mode is the caller's): receives the stage
  /// input (the first stage takes `images`), runs the stage forward and sends the output on;
  /// the last stage scores it against `labels` (elsewhere the result is zero).
  LossResult infer(int n, const Tensor& images, const std::vector<int32_t>& labels);

 private:
  const Tensor& forward(int micro, StageStepStats& stats);
  /// Waits with the deadline; an error is rethrown as "pipeline stage S (rank R): <what> rank
  /// <peer> (<floats> floats): <braid's message>".
  /// Posts the receive of `n` samples ([n, perSample...]) from `peer` into `into` and waits
  /// for it; `what` names it in an error ("activation of micro-batch 3").
  void receive(Tensor& into, int n, const std::vector<int>& perSample, int peer, int tag,
               const std::string& what, StageStepStats& stats);
  void wait(Request& request, const std::string& what, int peer, size_t floats,
            StageStepStats& stats);

  Communicator& world_;
  Model& model_;
  PipelineLayout layout_;
  size_t first_, last_;
  std::vector<int> inputShape_, outputShape_;
  double timeoutSeconds_;
  SoftmaxCrossEntropy ce_;
  // Per micro-batch, for the step: the stage input (kept for re-runs), labels (last stage), the
  // received output gradient, and the buffers of the sends in flight.
  std::vector<Tensor> inputs_, outputGrads_, sentActivations_, sentGrads_;
  std::vector<std::vector<int32_t>> labels_;
  std::vector<float> savedBuffers_;
  // One per neighbour, as braid orders sends per peer; declared after the buffers their sends
  // read, so they stop before those go.
  SendPump toNext_, toPrev_;
};

}  // namespace braid::trainer
