#include "trainer/pipeline/layer_timing.h"

#include <algorithm>
#include <chrono>
#include <limits>

namespace braid::trainer {

std::vector<double> measureLayerSeconds(Model& model, int batch, int repeats) {
  using Clock = std::chrono::steady_clock;
  Sequential& net = model.net;
  const size_t layers = net.size();
  ParamStore& store = model.store;
  const std::vector<float> buffers(store.buffers(), store.buffers() + store.numBuffers());
  std::vector<int> shape{batch};
  shape.insert(shape.end(), model.inputShape.begin(), model.inputShape.end());
  Tensor x(shape);
  std::fill(x.data.begin(), x.data.end(), 0.5f);
  std::vector<double> best(layers, std::numeric_limits<double>::infinity());
  std::vector<double> took(layers);
  Tensor dy;
  for (int r = 0; r < repeats; ++r) {
    const Tensor* cur = &x;
    for (size_t i = 0; i < layers; ++i) {
      const auto t0 = Clock::now();
      cur = &net.forwardRange(i, i + 1, *cur);
      took[i] = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    dy.resize(cur->shape);
    std::fill(dy.data.begin(), dy.data.end(), 1.0f);
    const Tensor* grad = &dy;
    for (size_t i = layers; i-- > 0;) {
      const auto t0 = Clock::now();
      grad = &net.backwardRange(i, i + 1, *grad);
      took[i] += std::chrono::duration<double>(Clock::now() - t0).count();
      best[i] = std::min(best[i], took[i]);
    }
  }
  std::copy(buffers.begin(), buffers.end(), store.buffers());
  store.zeroGrads();
  return best;
}

}  // namespace braid::trainer
