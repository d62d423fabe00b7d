// The device trainer's own kernels (everything that is not a GEMM or a convolution), each behind
// a host function that launches it on `stream` and checks the launch. Formulas follow the CPU
// layers of trainer/nn exactly (same order of operations where it matters: batch-norm statistics
// and optimizer updates).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace braid::trainer::cuda {

/// Throws kCudaError naming `kernel` when the last launch failed (cudaGetLastError).
void checkLaunch(const char* kernel, size_t elements);

/// out[i] = value.
void fillFloats(float* out, size_t n, float value, cudaStream_t stream);

/// y[r, c] = bias[c] for rows x cols (the Linear's bias before the GEMM adds x W^T).
void broadcastRows(const float* bias, float* y, int rows, int cols, cudaStream_t stream);
/// sums[c] += sum over r of m[r, c].
void addColumnSums(const float* m, int rows, int cols, float* sums, cudaStream_t stream);

/// y = max(x, 0); dx = y > 0 ? dy : 0.
void reluForward(const float* x, float* y, size_t n, cudaStream_t stream);
void reluBackward(const float* y, const float* dy, float* dx, size_t n, cudaStream_t stream);
/// out = a + b.
void addTensors(const float* a, const float* b, float* out, size_t n, cudaStream_t stream);

/// [planes, hw] -> [planes]: the mean of each plane; backward spreads dy / hw.
void globalAvgPoolForward(const float* x, float* y, size_t planes, size_t hw, cudaStream_t stream);
void globalAvgPoolBackward(const float* dy, float* dx, size_t planes, size_t hw,
                           cudaStream_t stream);

/// Batch norm over [n, c, hw] as trainer/nn/batch_norm.cc. Training: batch statistics (mean and
/// biased variance, summed in double), running statistics updated with `momentum` (unbiased
/// variance); eval: running statistics. Writes xhat and the per-channel 1/sqrt(var + eps). Each
/// channel is spread over several blocks (batchNormSlices) whose partial sums go to `scratch`,
/// batchNormScratch(a) doubles of device memory.
struct BatchNormArgs {
  int n = 0, c = 0;
  size_t hw = 0;
  float momentum = 0.1f, eps = 1e-5f;
  bool training = true;
};
int batchNormSlices(int channels, size_t perChannel);
size_t batchNormScratch(const BatchNormArgs& a);
void batchNormForward(const BatchNormArgs& a, const float* x, const float* gamma, const float* beta,
                      float* runningMean, float* runningVar, float* xhat, float* invStd, float* y,
                      double* scratch, cudaStream_t stream);
/// dgamma += sum(dy * xhat), dbeta += sum(dy); dx as the CPU (training: through the batch
/// statistics; eval: gamma * invStd * dy).
void batchNormBackward(const BatchNormArgs& a, const float* dy, const float* xhat,
                       const float* invStd, const float* gamma, float* dgamma, float* dbeta,
                       float* dx, double* scratch, cudaStream_t stream);

/// Softmax cross-entropy of logits [n, k] and labels: probs, and into `result` (device) the sum
/// over the batch of -log p[label] (result->lossSum) and the argmax hits (first on ties).
struct LossSums {
  double lossSum;
  long long correct;
  int badLabel;  ///< -1, or the index of a sample whose label is outside [0, k)
};
void softmaxCrossEntropyForward(const float* logits, const int32_t* labels, int n, int k,
                                float* probs, LossSums* result, cudaStream_t stream);
/// dlogits = scale / n * (probs - onehot(label)).
void softmaxCrossEntropyBackward(const float* probs, const int32_t* labels, int n, int k,
                                 float scale, float* dlogits, cudaStream_t stream);

/// SGD over n elements (pointers already at the range's start), as Optimizer::stepRange:
/// g = grad + wd * p; with momentum: m = first ? g : momentum * m + g, g = m; p -= lr * g.
void sgdStep(float* params, const float* grads, float* momentumBuf, size_t n, float lr, float wd,
             float momentum, bool first, cudaStream_t stream);
/// Adam/AdamW over n elements: p *= decay; g = grad + l2 * p; m, v updated;
/// p -= stepSize * m / (sqrt(v) / sqrtBc2 + eps).
struct AdamArgs {
  float stepSize, sqrtBc2, b1, b2, eps, decay, l2;
};
void adamStep(float* params, const float* grads, float* m, float* v, size_t n, const AdamArgs& a,
              cudaStream_t stream);

}  // namespace braid::trainer::cuda
