#include "trainer/pipeline/stage_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "common/error.h"

namespace braid::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

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
      pump_(2 * timeoutSeconds_) {}

void StageStep::wait(Request& request, const char* what, int micro, int peer, size_t floats,
                     StageStepStats& stats) {
  const auto t0 = Clock::now();
  try {
    request.wait(Deadline::after(2 * timeoutSeconds_));
  } catch (const Error& e) {
    throw Error(e.code(),
                fmt::format("pipeline stage {} (rank {}): {} of micro-batch {} with "
                            "rank {} ({} floats): {}",
                            layout_.stage, world_.rank(), what, micro, peer, floats, e.what()));
  }
  stats.waitSeconds += secondsSince(t0);
}

const Tensor& StageStep::forward(int micro, StageStepStats& stats) {
  const auto m = static_cast<size_t>(micro);
  const Tensor& out = model_.net.forwardRange(first_, last_, inputs_[m]);
  if (!layout_.last()) return out;
  const LossResult r = ce_.forward(out, labels_[m]);
  stats.lossSum += r.loss * static_cast<double>(r.count);
  stats.correct += static_cast<double>(r.correct);
  stats.samples += static_cast<double>(r.count);
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
  std::vector<Request> activationIn(count), gradIn(count);

  // Post every receive first: the transfers then never wait for this stage's progress.
  for (const StageOp& op : ops) {
    const auto m = static_cast<size_t>(op.micro);
    if (op.kind == StageOp::kForward && !layout_.first()) {
      inputs_[m].resize(batchShape(microSize, inputShape_));
      activationIn[m] = world_.recvAsync(inputs_[m].ptr(), inputs_[m].numel(), DataType::kFloat32,
                                         layout_.prevRank, op.micro);
    } else if (op.kind == StageOp::kBackward && !layout_.last()) {
      outputGrads_[m].resize(batchShape(microSize, outputShape_));
      gradIn[m] = world_.recvAsync(outputGrads_[m].ptr(), outputGrads_[m].numel(),
                                   DataType::kFloat32, layout_.nextRank, op.micro);
    }
  }
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
    pump_.push(world_.sendAsync(keep.ptr(), keep.numel(), DataType::kFloat32, peer, micro),
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
        wait(activationIn[m], "receiving the activation", op.micro, layout_.prevRank,
             inputs_[m].numel(), stats);
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
      wait(gradIn[m], "receiving the gradient", op.micro, layout_.nextRank, outputGrads_[m].numel(),
           stats);
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
  stats.waitSeconds += pump_.drain();
  stats.seconds = secondsSince(start);
  return stats;
}

LossResult StageStep::infer(int n, const Tensor& images, const std::vector<int32_t>& labels) {
  StageStepStats ignored;
  const Tensor* x = &images;
  if (!layout_.first()) {
    inputs_.resize(1);
    inputs_[0].resize(batchShape(n, inputShape_));
    Request r = world_.recvAsync(inputs_[0].ptr(), inputs_[0].numel(), DataType::kFloat32,
                                 layout_.prevRank, 0);
    wait(r, "receiving the evaluation activation", 0, layout_.prevRank, inputs_[0].numel(),
         ignored);
    x = &inputs_[0];
  }
  const Tensor& out = model_.net.forwardRange(first_, last_, *x);
  if (layout_.last()) return ce_.forward(out, labels);
  Request r = world_.sendAsync(out.ptr(), out.numel(), DataType::kFloat32, layout_.nextRank, 0);
  wait(r, "sending the evaluation activation", 0, layout_.nextRank, out.numel(), ignored);
  return {};
}

}  // namespace braid::trainer
