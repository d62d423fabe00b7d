#include "trainer/nn/optimizer.h"

#include <cmath>
#include <cstring>

#include "common/error.h"

namespace braid::trainer {

namespace {

constexpr char kMagic[8] = {'B', 'R', 'D', 'O', 'P', 'T', '0', '1'};

struct StateHeader {
  char magic[8];
  uint32_t kind;
  uint32_t reserved;
  uint64_t numParams;
  int64_t step;
  uint64_t firstMoment;   // element count of m
  uint64_t secondMoment;  // element count of v
};

}  // namespace

OptimizerKind parseOptimizerKind(const std::string& name) {
  if (name == "sgd") return OptimizerKind::kSgd;
  if (name == "adam") return OptimizerKind::kAdam;
  if (name == "adamw") return OptimizerKind::kAdamW;
  fail(ErrorCode::kInvalidUsage, "unknown optimizer '{}' (want sgd, adam or adamw)", name);
}

const char* optimizerKindName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdam:
      return "adam";
    case OptimizerKind::kAdamW:
      return "adamw";
  }
  return "?";
}

Optimizer::Optimizer(const OptimizerOptions& options, size_t numParams)
    : options_(options), n_(numParams) {
  BRAID_ENFORCE(options.lr >= 0.0f && options.warmupSteps >= 0 && options.globalBatch > 0 &&
                    options.eps > 0.0f && options.beta1 >= 0.0f && options.beta1 < 1.0f &&
                    options.beta2 >= 0.0f && options.beta2 < 1.0f,
                ErrorCode::kInvalidUsage,
                "Optimizer {}: lr {} warmup {} globalBatch {} eps {} betas ({}, {})",
                optimizerKindName(options.kind), options.lr, options.warmupSteps,
                options.globalBatch, options.eps, options.beta1, options.beta2);
  if (options.kind == OptimizerKind::kSgd) {
    if (options.momentum != 0.0f) m_.assign(n_, 0.0f);
  } else {
    m_.assign(n_, 0.0f);
    v_.assign(n_, 0.0f);
  }
}

float Optimizer::learningRate() const {
  double lr = options_.lr;
  if (options_.linearScaling) lr *= static_cast<double>(options_.globalBatch) / 256.0;
  if (step_ < options_.warmupSteps) {
    lr *= static_cast<double>(step_ + 1) / static_cast<double>(options_.warmupSteps);
  } else if (options_.decaySteps > 0) {
    const double span = std::max<int64_t>(1, options_.decaySteps - options_.warmupSteps);
    const double progress = std::min(1.0, static_cast<double>(step_ - options_.warmupSteps) / span);
    lr *= 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  return static_cast<float>(lr);
}

void Optimizer::stepRange(float* params, const float* grads, size_t begin, size_t end) {
  BRAID_ENFORCE(begin <= end && end <= n_, ErrorCode::kInvalidUsage,
                "Optimizer {}: range [{}, {}) outside {} parameters",
                optimizerKindName(options_.kind), begin, end, n_);
  const float lr = learningRate();
  const float wd = options_.weightDecay;
  if (options_.kind == OptimizerKind::kSgd) {
    const float mom = options_.momentum;
    const bool first = step_ == 0;
    for (size_t i = begin; i < end; ++i) {
      float g = grads[i] + wd * params[i];
      if (mom != 0.0f) {
        m_[i] = first ? g : mom * m_[i] + g;
        g = m_[i];
      }
      params[i] -= lr * g;
    }
    return;
  }
  const double t = static_cast<double>(step_ + 1);
  const float b1 = options_.beta1, b2 = options_.beta2, eps = options_.eps;
  const float stepSize = static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(b1), t)));
  const float sqrtBc2 = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(b2), t)));
  const bool decoupled = options_.kind == OptimizerKind::kAdamW;
  const float decay = decoupled ? 1.0f - lr * wd : 1.0f;
  const float l2 = decoupled ? 0.0f : wd;
  for (size_t i = begin; i < end; ++i) {
    float p = params[i] * decay;
    const float g = grads[i] + l2 * p;
    m_[i] = b1 * m_[i] + (1.0f - b1) * g;
    v_[i] = b2 * v_[i] + (1.0f - b2) * g * g;
    params[i] = p - stepSize * m_[i] / (std::sqrt(v_[i]) / sqrtBc2 + eps);
  }
}

void Optimizer::step(float* params, const float* grads) {
  stepRange(params, grads, 0, n_);
  finishStep();
}

std::vector<char> Optimizer::saveState() const {
  StateHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.kind = static_cast<uint32_t>(options_.kind);
  h.numParams = n_;
  h.step = step_;
  h.firstMoment = m_.size();
  h.secondMoment = v_.size();
  std::vector<char> out(sizeof h + (m_.size() + v_.size()) * sizeof(float));
  std::memcpy(out.data(), &h, sizeof h);
  char* p = out.data() + sizeof h;
  if (!m_.empty()) std::memcpy(p, m_.data(), m_.size() * sizeof(float));
  p += m_.size() * sizeof(float);
  if (!v_.empty()) std::memcpy(p, v_.data(), v_.size() * sizeof(float));
  return out;
}

void Optimizer::loadState(const char* data, size_t size) {
  const char* kind = optimizerKindName(options_.kind);
  BRAID_ENFORCE(size >= sizeof(StateHeader), ErrorCode::kInvalidUsage,
                "Optimizer {}: state of {} bytes is shorter than its {}-byte header", kind, size,
                sizeof(StateHeader));
  StateHeader h;
  std::memcpy(&h, data, sizeof h);
  BRAID_ENFORCE(std::memcmp(h.magic, kMagic, sizeof kMagic) == 0, ErrorCode::kInvalidUsage,
                "Optimizer {}: state has a bad magic (not optimizer state, or another version)",
                kind);
  BRAID_ENFORCE(h.kind == static_cast<uint32_t>(options_.kind), ErrorCode::kInvalidUsage,
                "Optimizer {}: state was saved by optimizer kind {}", kind, h.kind);
  BRAID_ENFORCE(h.numParams == n_ && h.firstMoment == m_.size() && h.secondMoment == v_.size(),
                ErrorCode::kInvalidUsage,
                "Optimizer {}: state for {} parameters (moments {}, {}), this one has {} ({}, {})",
                kind, h.numParams, h.firstMoment, h.secondMoment, n_, m_.size(), v_.size());
  const size_t want = sizeof h + (m_.size() + v_.size()) * sizeof(float);
  BRAID_ENFORCE(size == want && h.step >= 0, ErrorCode::kInvalidUsage,
                "Optimizer {}: state is {} bytes, expected {} (truncated?) step {}", kind, size,
                want, h.step);
  step_ = h.step;
  const char* p = data + sizeof h;
  if (!m_.empty()) std::memcpy(m_.data(), p, m_.size() * sizeof(float));
  p += m_.size() * sizeof(float);
  if (!v_.empty()) std::memcpy(v_.data(), p, v_.size() * sizeof(float));
}

}  // namespace braid::trainer
