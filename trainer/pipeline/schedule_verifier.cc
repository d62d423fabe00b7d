#include "trainer/pipeline/schedule_verifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>

namespace braid::trainer {
namespace {

/// A message in flight: which micro-batch it carries and when it arrives.
struct Message {
  int micro;
  double at;
};

/// Each micro-batch exactly once forward and once backward, the forward first.
std::string checkStageList(const std::vector<StageOp>& ops, int micros, int stage) {
  std::vector<int> forwards(static_cast<size_t>(micros), 0), backwards = forwards;
  for (const StageOp& op : ops) {
    if (op.micro < 0 || op.micro >= micros) {
      return fmt::format("stage {}: micro-batch {} outside 0..{}", stage, op.micro, micros - 1);
    }
    auto& seen = op.kind == StageOp::kForward ? forwards : backwards;
    if (++seen[static_cast<size_t>(op.micro)] > 1) {
      return fmt::format("stage {}: {} of micro-batch {} appears twice", stage,
                         op.kind == StageOp::kForward ? "forward" : "backward", op.micro);
    }
    if (op.kind == StageOp::kBackward && forwards[static_cast<size_t>(op.micro)] == 0) {
      return fmt::format("stage {}: backward of micro-batch {} before its forward", stage,
                         op.micro);
    }
  }
  for (int m = 0; m < micros; ++m) {
    if (forwards[static_cast<size_t>(m)] == 0 || backwards[static_cast<size_t>(m)] == 0) {
      return fmt::format("stage {}: micro-batch {} has no {}", stage, m,
                         forwards[static_cast<size_t>(m)] == 0 ? "forward" : "backward");
    }
  }
  return "";
}

}  // namespace

PipelineCheck verifyPipeline(const std::vector<std::vector<StageOp>>& ops, int micros,
                             double forwardCost, double backwardCost) {
  PipelineCheck check;
  const int stages = static_cast<int>(ops.size());
  if (stages < 1 || micros < 1) {
    check.error = fmt::format("{} stages, {} micro-batches", stages, micros);
    return check;
  }
  for (int s = 0; s < stages; ++s) {
    check.error = checkStageList(ops[static_cast<size_t>(s)], micros, s);
    if (!check.error.empty()) return check;
  }
  // activations[s]: stage s -> s+1; gradients[s]: stage s+1 -> s.
  std::vector<std::deque<Message>> activations(static_cast<size_t>(stages)),
      gradients(static_cast<size_t>(stages));
  std::vector<size_t> next(static_cast<size_t>(stages), 0);
  std::vector<double> freeAt(static_cast<size_t>(stages), 0), busy = freeAt;
  std::vector<int> inFlight(static_cast<size_t>(stages), 0);
  check.peakInFlight.assign(static_cast<size_t>(stages), 0);
  size_t remaining = 0;
  for (const auto& list : ops) remaining += list.size();

  // Run any stage whose next operation can start; the start times do not depend on which
  // ready stage goes first, since each stage's order is fixed.
  while (remaining > 0) {
    bool progressed = false;
    for (int s = 0; s < stages; ++s) {
      const auto si = static_cast<size_t>(s);
      if (next[si] == ops[si].size()) continue;
      const StageOp op = ops[si][next[si]];
      const bool forward = op.kind == StageOp::kForward;
      const bool receives = forward ? s > 0 : s + 1 < stages;
      std::deque<Message>* in = nullptr;
      if (receives) in = forward ? &activations[si - 1] : &gradients[si];
      if (in && in->empty()) continue;  // waits for its message
      double start = freeAt[si];
      if (in) {
        const Message msg = in->front();
        if (msg.micro != op.micro) {
          check.error = fmt::format(
              "stage {}: {} of micro-batch {} receives micro-batch {}'s {} from stage {}", s,
              forward ? "forward" : "backward", op.micro, msg.micro,
              forward ? "activation" : "gradient", forward ? s - 1 : s + 1);
          return check;
        }
        start = std::max(start, msg.at);
        in->pop_front();
      }
      const double cost = forward ? forwardCost : backwardCost;
      freeAt[si] = start + cost;
      busy[si] += cost;
      if (forward && s + 1 < stages) activations[si].push_back({op.micro, freeAt[si]});
      if (!forward && s > 0) gradients[si - 1].push_back({op.micro, freeAt[si]});
      inFlight[si] += forward ? 1 : -1;
      check.peakInFlight[si] = std::max(check.peakInFlight[si], inFlight[si]);
      ++next[si];
      --remaining;
      progressed = true;
    }
    if (!progressed) {
      std::string state;
      for (int s = 0; s < stages; ++s) {
        const auto si = static_cast<size_t>(s);
        if (next[si] == ops[si].size()) continue;
        const StageOp op = ops[si][next[si]];
        const bool forward = op.kind == StageOp::kForward;
        state += fmt::format("; stage {} at {}{} waits for the {} of micro-batch {} from stage {}",
                             s, forward ? 'F' : 'B', op.micro, forward ? "activation" : "gradient",
                             op.micro, forward ? s - 1 : s + 1);
      }
      check.error = "deadlock" + state;
      return check;
    }
  }
  check.makespan = *std::max_element(freeAt.begin(), freeAt.end());
  double busyTotal = 0;
  for (double b : busy) busyTotal += b;
  check.bubble = check.makespan > 0 ? 1.0 - busyTotal / (stages * check.makespan) : 0.0;
  return check;
}

double expectedBubble(int stages, int micros) {
  return static_cast<double>(stages - 1) / static_cast<double>(micros + stages - 1);
}

}  // namespace braid::trainer
