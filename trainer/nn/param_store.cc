#include "trainer/nn/param_store.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "trainer/nn/rng.h"
#include "trainer/nn/tensor.h"

namespace braid::trainer {

ParamId ParamStore::addParam(std::string name, std::vector<int> shape, Init init, int fanIn) {
  BRAID_ENFORCE(!finalized_, ErrorCode::kInvalidUsage,
                "ParamStore: cannot add parameter '{}' after finalize()", name);
  for (const auto& v : paramViews_) {
    BRAID_ENFORCE(v.name != name, ErrorCode::kInvalidUsage, "ParamStore: duplicate name '{}'",
                  name);
  }
  BRAID_ENFORCE(fanIn > 0, ErrorCode::kInvalidUsage, "ParamStore: '{}' has fanIn {}", name, fanIn);
  ParamView v;
  v.name = std::move(name);
  v.size = shapeNumel(shape);
  v.shape = std::move(shape);
  v.offset = paramCount_;
  v.init = init;
  v.fanIn = fanIn;
  paramCount_ += v.size;
  paramViews_.push_back(std::move(v));
  ids_.emplace_back(false, paramViews_.size() - 1);
  return ids_.size() - 1;
}

ParamId ParamStore::addBuffer(std::string name, std::vector<int> shape, float fill) {
  BRAID_ENFORCE(!finalized_, ErrorCode::kInvalidUsage,
                "ParamStore: cannot add buffer '{}' after finalize()", name);
  ParamView v;
  v.name = std::move(name);
  v.size = shapeNumel(shape);
  v.shape = std::move(shape);
  v.offset = bufferCount_;
  // Buffers are filled with a constant; reuse fanIn to carry nothing and init to say which.
  v.init = fill == 1.0f ? Init::kOnes : Init::kZeros;
  BRAID_ENFORCE(fill == 0.0f || fill == 1.0f, ErrorCode::kInvalidUsage,
                "ParamStore: buffer '{}' fill {} must be 0 or 1", v.name, fill);
  bufferCount_ += v.size;
  bufferViews_.push_back(std::move(v));
  ids_.emplace_back(true, bufferViews_.size() - 1);
  return ids_.size() - 1;
}

void ParamStore::finalize(uint64_t seed) {
  BRAID_ENFORCE(!finalized_, ErrorCode::kInvalidUsage, "ParamStore: finalize() called twice");
  params_.assign(paramCount_, 0.0f);
  grads_.assign(paramCount_, 0.0f);
  buffers_.assign(bufferCount_, 0.0f);
  finalized_ = true;
  initialise(seed);
}

void ParamStore::initialise(uint64_t seed) {
  BRAID_ENFORCE(finalized_, ErrorCode::kInvalidUsage, "ParamStore: initialise() before finalize()");
  for (size_t i = 0; i < paramViews_.size(); ++i) {
    const ParamView& v = paramViews_[i];
    float* p = params_.data() + v.offset;
    switch (v.init) {
      case Init::kKaimingUniform: {
        SplitMix64 rng(seed ^ (0x9E3779B97F4A7C15ull * (i + 1)));
        const float bound = 1.0f / std::sqrt(static_cast<float>(v.fanIn));
        for (size_t k = 0; k < v.size; ++k) p[k] = rng.uniform(-bound, bound);
        break;
      }
      case Init::kOnes:
        std::fill(p, p + v.size, 1.0f);
        break;
      case Init::kZeros:
        std::fill(p, p + v.size, 0.0f);
        break;
    }
  }
  for (const ParamView& v : bufferViews_) {
    std::fill(buffers_.data() + v.offset, buffers_.data() + v.offset + v.size,
              v.init == Init::kOnes ? 1.0f : 0.0f);
  }
  std::fill(grads_.begin(), grads_.end(), 0.0f);
}

const ParamView& ParamStore::viewOf(ParamId id, bool wantBuffer) const {
  BRAID_ENFORCE(finalized_, ErrorCode::kInvalidUsage, "ParamStore: access before finalize()");
  BRAID_ENFORCE(id < ids_.size(), ErrorCode::kInvalidUsage, "ParamStore: id {} out of range {}", id,
                ids_.size());
  auto [isBuffer, index] = ids_[id];
  BRAID_ENFORCE(isBuffer == wantBuffer, ErrorCode::kInvalidUsage,
                "ParamStore: id {} is a {}, not a {}", id, isBuffer ? "buffer" : "parameter",
                wantBuffer ? "buffer" : "parameter");
  return isBuffer ? bufferViews_[index] : paramViews_[index];
}

float* ParamStore::value(ParamId id) { return params_.data() + viewOf(id, false).offset; }
const float* ParamStore::value(ParamId id) const {
  return params_.data() + viewOf(id, false).offset;
}
float* ParamStore::grad(ParamId id) { return grads_.data() + viewOf(id, false).offset; }
float* ParamStore::buffer(ParamId id) { return buffers_.data() + viewOf(id, true).offset; }
const float* ParamStore::buffer(ParamId id) const {
  return buffers_.data() + viewOf(id, true).offset;
}

void ParamStore::zeroGrads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

uint64_t ParamStore::layoutHash() const {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  };
  for (const auto* list : {&paramViews_, &bufferViews_}) {
    for (const ParamView& v : *list) {
      mix(v.name.data(), v.name.size());
      for (int d : v.shape) mix(&d, sizeof d);
      mix(&v.offset, sizeof v.offset);
    }
    uint64_t sep = list->size();
    mix(&sep, sizeof sep);
  }
  return h;
}

}  // namespace braid::trainer
