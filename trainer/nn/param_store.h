// One flat float32 buffer for all parameters, one for all gradients, one for non-trained buffers
// (batch-norm running statistics), with named views registered by layers in a fixed order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace braid::trainer {

/// How a parameter is initialised by ParamStore::initialise().
enum class Init {
  kKaimingUniform,  ///< U(-1/sqrt(fanIn), 1/sqrt(fanIn)): PyTorch's default for Linear/Conv2d
                    ///< weights (kaiming_uniform_ with a = sqrt(5)) and biases
  kOnes,            ///< batch-norm weight (gamma)
  kZeros,           ///< batch-norm bias (beta), running mean
};

/// A named slice of a flat buffer.
struct ParamView {
  std::string name;        ///< "stage2.block0.conv1.weight"
  size_t offset = 0;       ///< first element in the flat buffer
  size_t size = 0;         ///< number of elements
  std::vector<int> shape;  ///< PyTorch layout: Linear [out, in], Conv2d [out, in, kh, kw]
  Init init = Init::kZeros;
  int fanIn = 1;  ///< used by kKaimingUniform
};

/// Handle to a registered view (its index in registration order).
using ParamId = size_t;

/// The flat parameter, gradient and buffer storage of one model.
///
/// Layers register their views while the model is built (addParam / addBuffer); registration
/// order is fixed by the model's structure, so every rank gets the same layout. finalize()
/// allocates the storage once; afterwards pointers returned by value()/grad()/buffer() stay valid
/// for the store's lifetime, and no more views may be added. Not thread-safe.
class ParamStore {
 public:
  ParamStore() = default;
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  /// Registers a trained parameter (gets a gradient). Names must be unique.
  ParamId addParam(std::string name, std::vector<int> shape, Init init, int fanIn = 1);
  /// Registers a non-trained buffer (no gradient; e.g. running mean) initialised to `fill`.
  ParamId addBuffer(std::string name, std::vector<int> shape, float fill);

  /// Allocates the flat storage and initialises it deterministically from `seed`: parameter i
  /// draws from its own stream seeded by (seed, i), so the values do not depend on thread count
  /// or on other parameters' sizes. Gradients start at zero. Call once, after all registrations.
  void finalize(uint64_t seed);
  /// Re-draws every parameter and buffer from `seed` (same rule as finalize()).
  void initialise(uint64_t seed);
  bool finalized() const { return finalized_; }

  /// Pointers into the flat storage; valid after finalize().
  float* value(ParamId id);
  const float* value(ParamId id) const;
  float* grad(ParamId id);
  float* buffer(ParamId id);
  const float* buffer(ParamId id) const;

  /// All parameters / gradients / buffers, contiguous, in registration order.
  float* params() { return params_.data(); }
  const float* params() const { return params_.data(); }
  float* grads() { return grads_.data(); }
  const float* grads() const { return grads_.data(); }
  float* buffers() { return buffers_.data(); }
  const float* buffers() const { return buffers_.data(); }
  size_t numParams() const { return paramCount_; }
  size_t numBuffers() const { return bufferCount_; }

  /// Sets every gradient to zero (call before each accumulation window).
  void zeroGrads();

  /// Views in registration order (the order of the flat buffers).
  const std::vector<ParamView>& paramViews() const { return paramViews_; }
  const std::vector<ParamView>& bufferViews() const { return bufferViews_; }

  /// 64-bit FNV-1a over the names, shapes and offsets: equal across ranks iff the layouts match.
  uint64_t layoutHash() const;

 private:
  std::vector<ParamView> paramViews_;
  std::vector<ParamView> bufferViews_;
  // addParam/addBuffer ids share one index space: id -> (isBuffer, index in its view list).
  std::vector<std::pair<bool, size_t>> ids_;
  std::vector<float> params_, grads_, buffers_;
  size_t paramCount_ = 0, bufferCount_ = 0;
  bool finalized_ = false;

  const ParamView& viewOf(ParamId id, bool wantBuffer) const;
};

}  // namespace braid::trainer
