#include "trainer/pipeline/stage_step.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"
#include "trainer/train/seconds.h"

namespace braid::trainer {
namespace {

std::vector<int> batchShape(int n, const std::vector<int>& perSample) {
  std::vector<int> shape{n};
  shape.insert(shape.end(), perSample.begin(), perSample.end());
  return shape;
}

}  // namespace

StageStep::StageStep(Communicator& world, Model& model, const PipelineLayout& layout,
                     size_t firstLayer, size_t lastLayer, std::vector<int> inputShape,
                     std::vector<int> outputShape)
    : world_(world),
      model_(model),
      layout_(layout),
      first_(firstLayer),
      last_(lastLayer),
      inputShape_(std::move(inputShape)),
      outputShape_(std::move(outputShape)),
      timeoutSeconds_(defaultTimeoutSeconds()),
      toNext_(2 * timeoutSeconds_),
      toPrev_(2 * timeoutSeconds_) {}

void StageStep::wait(Request& request, const std::string& what, int peer, size_t floats,
                     StageStepStats& stats) {
  const auto t0 = Clock::now();
  try {
    request.wait(Deadline::after(2 * timeoutSeconds_));
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("pipeline stage {} (rank {}): {} rank {} ({} floats): {}",
                                      layout_.stage, world_.rank(), what, peer, floats, e.what()));
  }
  stats.waitSeconds += secondsSince(t0);
}

void StageStep::receive(Tensor& into, int n, const std::vector<int>& perSample, int peer, int tag,
                        const std::string& what, StageStepStats& stats) {
  into.resize(batchShape(n, perSample));
  Request r = world_.recvAsync(into.ptr(), into.numel(), DataType::kFloat32, peer, tag);
  wait(r, "receiving the " + what + " from", peer, into.numel(), stats);
}

const Tensor& StageStep::forward(int micro, StageStepStats& stats) {
  const auto m = static_cast<size_t>(micro);
  const Tensor& out = model_.net.forwardRange(first_, last_, inputs_[m]);
  if (!layout_.last()) return out;
  const LossResult r = ce_.forward(out, labels_[m]);
  stats.sums.add(r);
  return out;
}

StageStepStats StageStep::run(const std::vector<StageOp>& ops, int micros, int microSize,
                              const MicroBatchLoader& load) {
  StageStepStats stats;
  const auto start = Clock::now();
  const auto count = static_cast<size_t>(micros);
  inputs_.resize(count);
  outputGrads_.resize(count);
  sentActivations_.resize(count);
  sentGrads_.resize(count);
  labels_.resize(count);
  if (layout_.first() || layout_.last()) {
    Tensor images;
    for (int m = 0; m < micros; ++m) {
      auto& x = layout_.first() ? inputs_[static_cast<size_t>(m)] : images;
      load(m, x, labels_[static_cast<size_t>(m)]);
    }
  }

  // Copies `t` into `keep` (alive until the send completes) and hands the send to the pump.
  auto send = [&](const Tensor& t, Tensor& keep, const char* what, int peer, int micro) {
    keep = t;
    (peer == layout_.nextRank ? toNext_ : toPrev_)
        .push(world_.sendAsync(keep.ptr(), keep.numel(), DataType::kFloat32, peer, micro),
              fmt::format("pipeline stage {} (rank {}): {} of micro-batch {} to rank {} ({} "
                          "floats)",
                          layout_.stage, world_.rank(), what, micro, peer, keep.numel()));
  };
  const float lossScale = 1.0f / static_cast<float>(micros);
  int lastForward = -1;  // the micro-batch whose forward state the layers hold
  for (const StageOp& op : ops) {
    const auto m = static_cast<size_t>(op.micro);
    if (op.kind == StageOp::kForward) {
      if (!layout_.first()) {
        receive(inputs_[m], microSize, inputShape_, layout_.prevRank, op.micro,
                fmt::format("activation of micro-batch {}", op.micro), stats);
      }
      const auto t0 = Clock::now();
      const Tensor& out = forward(op.micro, stats);
      lastForward = op.micro;
      if (!layout_.last())
        send(out, sentActivations_[m], "sending the activation", layout_.nextRank, op.micro);
      stats.computeSeconds += secondsSince(t0);
      continue;
    }
    if (!layout_.last()) {
      receive(outputGrads_[m], microSize, outputShape_, layout_.nextRank, op.micro,
              fmt::format("gradient of micro-batch {}", op.micro), stats);
    }
    const auto t0 = Clock::now();
    if (lastForward != op.micro) {
      // Re-run the forward for the layers' state; its loss is not counted again.
      ParamStore& store = model_.store;
      savedBuffers_.assign(store.buffers(), store.buffers() + store.numBuffers());
      StageStepStats ignored;
      forward(op.micro, ignored);
      std::copy(savedBuffers_.begin(), savedBuffers_.end(), store.buffers());
      stats.recomputeSeconds += secondsSince(t0);
    }
    const Tensor& dy = layout_.last() ? ce_.backward(lossScale) : outputGrads_[m];
    const Tensor& dx = model_.net.backwardRange(first_, last_, dy);
    lastForward = -1;
    if (!layout_.first())
      send(dx, sentGrads_[m], "sending the gradient", layout_.prevRank, op.micro);
    stats.computeSeconds += secondsSince(t0);
  }
  stats.waitSeconds += toNext_.drain() + toPrev_.drain();
  stats.seconds = secondsSince(start);
  return stats;
}

LossResult StageStep::infer(int n, const Tensor& images, const std::vector<int32_t>& labels) {
  StageStepStats ignored;
  const Tensor* x = &images;
  if (!layout_.first()) {
    inputs_.resize(1);
    receive(inputs_[0], n, inputShape_, layout_.prevRank, 0, "evaluation batch's activation",
            ignored);
    x = &inputs_[0];
  }
  const Tensor& out = model_.net.forwardRange(first_, last_, *x);
  if (layout_.last()) return ce_.forward(out, labels);
  Request r = world_.sendAsync(out.ptr(), out.numel(), DataType::kFloat32, layout_.nextRank, 0);
  wait(r, "sending an evaluation batch's activation to", layout_.nextRank, out.numel(), ignored);
  return {};
}

}  // namespace braid::trainer
