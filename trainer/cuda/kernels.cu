#include <algorithm>

#include "trainer/cuda/grid.h"
#include "trainer/cuda/kernels.h"

namespace braid::trainer::cuda {
namespace {

constexpr int kReduceThreads = 512;  // the loss: one block for the whole batch

// Sum of v over the block, returned to every thread. `scratch` holds blockDim.x doubles.
__device__ double blockSum(double v, double* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
    __syncthreads();
  }
  const double total = scratch[0];
  __syncthreads();
  return total;
}

__global__ void fillKernel(float* out, size_t n, float value) {
  BRAID_GRID_STRIDE(i, n) out[i] = value;
}

__global__ void broadcastRowsKernel(const float* bias, float* y, size_t total, int cols) {
  BRAID_GRID_STRIDE(i, total) y[i] = bias[i % cols];
}

__global__ void columnSumsKernel(const float* m, int rows, int cols, float* sums) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float acc = sums[c];  // the CPU adds row after row into the gradient
  for (int r = 0; r < rows; ++r) acc += m[static_cast<size_t>(r) * cols + c];
  sums[c] = acc;
}

__global__ void reluForwardKernel(const float* x, float* y, size_t n) {
  BRAID_GRID_STRIDE(i, n) y[i] = fmaxf(x[i], 0.0f);
}

__global__ void reluBackwardKernel(const float* y, const float* dy, float* dx, size_t n) {
  BRAID_GRID_STRIDE(i, n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void addKernel(const float* a, const float* b, float* out, size_t n) {
  BRAID_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void avgPoolForwardKernel(const float* x, float* y, size_t planes, size_t hw) {
  BRAID_GRID_STRIDE(p, planes) {
    const float* in = x + p * hw;
    float sum = 0.0f;
    for (size_t i = 0; i < hw; ++i) sum += in[i];
    y[p] = sum / static_cast<float>(hw);
  }
}

__global__ void avgPoolBackwardKernel(const float* dy, float* dx, size_t planes, size_t hw) {
  BRAID_GRID_STRIDE(i, planes * hw) dx[i] = dy[i / hw] / static_cast<float>(hw);
}

// Batch norm spreads channel c over gridDim.x slices (blockIdx.y = c, blockIdx.x = slice): element
// j of the channel (sample j / hw, position j % hw) belongs to slice j / chunk. Each slice writes
// its partial sums to `partials` [c][slice]; the next kernel adds them up in slice order in every
// block (the same double in each), so all slices use the same statistics.
__device__ size_t channelIndex(size_t j, int c, int channels, size_t hw) {
  return (j / hw * channels + c) * hw + j % hw;
}

struct SliceRange {
  size_t begin, end;
};

__device__ SliceRange sliceOf(const BatchNormArgs& a) {
  const size_t m = static_cast<size_t>(a.n) * a.hw;
  const size_t chunk = (m + gridDim.x - 1) / gridDim.x;
  const size_t begin = blockIdx.x * chunk;
  return {begin < m ? begin : m, begin + chunk < m ? begin + chunk : m};
}

// The sum over the slices of channel blockIdx.y, in slice order.
__device__ double sumOfSlices(const double* partials) {
  double total = 0.0;
  const double* p = partials + static_cast<size_t>(blockIdx.y) * gridDim.x;
  for (unsigned s = 0; s < gridDim.x; ++s) total += p[s];
  return total;
}

__global__ void bnSumKernel(BatchNormArgs a, const float* x, double* partials) {
  __shared__ double scratch[kThreads];
  const int c = blockIdx.y;
  const SliceRange r = sliceOf(a);
  double sum = 0.0;
  for (size_t j = r.begin + threadIdx.x; j < r.end; j += blockDim.x) {
    sum += x[channelIndex(j, c, a.c, a.hw)];
  }
  sum = blockSum(sum, scratch);
  if (threadIdx.x == 0) partials[static_cast<size_t>(c) * gridDim.x + blockIdx.x] = sum;
}

// Sum of (x - mean)^2 over the slice, mean (as float, like the CPU) from the first partials.
__global__ void bnSquaresKernel(BatchNormArgs a, const float* x, const double* sums,
                                double* partials) {
  __shared__ double scratch[kThreads];
  __shared__ float mean;
  const int c = blockIdx.y;
  const size_t m = static_cast<size_t>(a.n) * a.hw;
  if (threadIdx.x == 0) mean = static_cast<float>(sumOfSlices(sums) / static_cast<double>(m));
  __syncthreads();
  const float fm = mean;
  const SliceRange r = sliceOf(a);
  double sq = 0.0;
  for (size_t j = r.begin + threadIdx.x; j < r.end; j += blockDim.x) {
    const float d = x[channelIndex(j, c, a.c, a.hw)] - fm;
    sq += d * d;
  }
  sq = blockSum(sq, scratch);
  if (threadIdx.x == 0) partials[static_cast<size_t>(c) * gridDim.x + blockIdx.x] = sq;
}

// Training: the statistics from the partials (slice 0 updates the running ones and invStd);
// eval: the running statistics. Then xhat and y over the slice.
__global__ void bnNormalizeKernel(BatchNormArgs a, const float* x, const double* sums,
                                  const double* squares, const float* gamma, const float* beta,
                                  float* runningMean, float* runningVar, float* xhat, float* invStd,
                                  float* y) {
  __shared__ float stats[2];  // mean, 1/sqrt(var + eps)
  const int c = blockIdx.y;
  const size_t m = static_cast<size_t>(a.n) * a.hw;
  if (threadIdx.x == 0) {
    if (a.training) {
      const double mean = sumOfSlices(sums) / static_cast<double>(m);
      const double var = sumOfSlices(squares) / static_cast<double>(m);
      stats[0] = static_cast<float>(mean);
      stats[1] = static_cast<float>(1.0 / sqrt(var + a.eps));
      if (blockIdx.x == 0) {
        const double mom = a.momentum;
        runningMean[c] = static_cast<float>((1.0 - mom) * runningMean[c] + mom * mean);
        runningVar[c] = static_cast<float>((1.0 - mom) * runningVar[c] +
                                           mom * var * static_cast<double>(m) / (m - 1));
      }
    } else {
      stats[0] = runningMean[c];
      stats[1] = static_cast<float>(1.0 / sqrt(static_cast<double>(runningVar[c]) + a.eps));
    }
    if (blockIdx.x == 0) invStd[c] = stats[1];
  }
  __syncthreads();
  const float fmean = stats[0], inv = stats[1], g = gamma[c], b = beta[c];
  const SliceRange r = sliceOf(a);
  for (size_t j = r.begin + threadIdx.x; j < r.end; j += blockDim.x) {
    const size_t at = channelIndex(j, c, a.c, a.hw);
    const float xh = (x[at] - fmean) * inv;
    xhat[at] = xh;
    y[at] = g * xh + b;
  }
}

__global__ void bnBackwardSumsKernel(BatchNormArgs a, const float* dy, const float* xhat,
                                     double* dySums, double* dyXhatSums) {
  __shared__ double scratch[kThreads];
  const int c = blockIdx.y;
  const SliceRange r = sliceOf(a);
  double sumDy = 0.0, sumDyXhat = 0.0;
  for (size_t j = r.begin + threadIdx.x; j < r.end; j += blockDim.x) {
    const size_t at = channelIndex(j, c, a.c, a.hw);
    sumDy += dy[at];
    sumDyXhat += dy[at] * xhat[at];
  }
  sumDy = blockSum(sumDy, scratch);
  sumDyXhat = blockSum(sumDyXhat, scratch);
  if (threadIdx.x == 0) {
    const size_t at = static_cast<size_t>(c) * gridDim.x + blockIdx.x;
    dySums[at] = sumDy;
    dyXhatSums[at] = sumDyXhat;
  }
}

__global__ void bnBackwardDxKernel(BatchNormArgs a, const float* dy, const float* xhat,
                                   const double* dySums, const double* dyXhatSums,
                                   const float* invStd, const float* gamma, float* dgamma,
                                   float* dbeta, float* dx) {
  __shared__ float coef[2];  // mean(dy), mean(dy * xhat) (0 in eval)
  const int c = blockIdx.y;
  const size_t m = static_cast<size_t>(a.n) * a.hw;
  if (threadIdx.x == 0) {
    const double sumDy = sumOfSlices(dySums), sumDyXhat = sumOfSlices(dyXhatSums);
    if (blockIdx.x == 0) {
      dgamma[c] += static_cast<float>(sumDyXhat);
      dbeta[c] += static_cast<float>(sumDy);
    }
    coef[0] = a.training ? static_cast<float>(sumDy / m) : 0.0f;
    coef[1] = a.training ? static_cast<float>(sumDyXhat / m) : 0.0f;
  }
  __syncthreads();
  const float scale = gamma[c] * invStd[c], meanDy = coef[0], meanDyXhat = coef[1];
  const SliceRange r = sliceOf(a);
  for (size_t j = r.begin + threadIdx.x; j < r.end; j += blockDim.x) {
    const size_t at = channelIndex(j, c, a.c, a.hw);
    dx[at] = scale * (dy[at] - meanDy - xhat[at] * meanDyXhat);
  }
}

__global__ void softmaxForwardKernel(const float* logits, const int32_t* labels, int n, int k,
                                     float* probs, LossSums* result) {
  __shared__ double scratch[kReduceThreads];
  __shared__ int badLabel;
  if (threadIdx.x == 0) badLabel = -1;
  __syncthreads();
  double loss = 0.0, correct = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int label = labels[i];
    if (label < 0 || label >= k) {
      badLabel = i;
      continue;
    }
    const float* z = logits + static_cast<size_t>(i) * k;
    float* p = probs + static_cast<size_t>(i) * k;
    int argmax = 0;
    for (int j = 1; j < k; ++j) {
      if (z[j] > z[argmax]) argmax = j;
    }
    const float zmax = z[argmax];
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += exp(static_cast<double>(z[j] - zmax));
    const double logSum = log(sum);
    for (int j = 0; j < k; ++j) p[j] = static_cast<float>(exp((z[j] - zmax) - logSum));
    loss += logSum - (z[label] - zmax);
    if (argmax == label) correct += 1.0;
  }
  loss = blockSum(loss, scratch);
  correct = blockSum(correct, scratch);
  if (threadIdx.x == 0) {
    result->lossSum = loss;
    result->correct = static_cast<long long>(correct);
    result->badLabel = badLabel;
  }
}

__global__ void softmaxBackwardKernel(const float* probs, const int32_t* labels, int n, int k,
                                      float s, float* dlogits) {
  BRAID_GRID_STRIDE(at, static_cast<size_t>(n) * k) {
    const int i = static_cast<int>(at / k), j = static_cast<int>(at % k);
    dlogits[at] = s * (probs[at] - (j == labels[i] ? 1.0f : 0.0f));
  }
}

__global__ void sgdKernel(float* params, const float* grads, float* mbuf, size_t n, float lr,
                          float wd, float momentum, bool first) {
  BRAID_GRID_STRIDE(i, n) {
    float g = grads[i] + wd * params[i];
    if (mbuf != nullptr) {
      mbuf[i] = first ? g : momentum * mbuf[i] + g;
      g = mbuf[i];
    }
    params[i] -= lr * g;
  }
}

__global__ void adamKernel(float* params, const float* grads, float* m, float* v, size_t n,
                           AdamArgs a) {
  BRAID_GRID_STRIDE(i, n) {
    const float p = params[i] * a.decay;
    const float g = grads[i] + a.l2 * p;
    m[i] = a.b1 * m[i] + (1.0f - a.b1) * g;
    v[i] = a.b2 * v[i] + (1.0f - a.b2) * g * g;
    params[i] = p - a.stepSize * m[i] / (sqrtf(v[i]) / a.sqrtBc2 + a.eps);
  }
}

}  // namespace

void fillFloats(float* out, size_t n, float value, cudaStream_t stream) {
  fillKernel<<<blocksFor(n), kThreads, 0, stream>>>(out, n, value);
  checkLaunch("fillFloats", n);
}

void broadcastRows(const float* bias, float* y, int rows, int cols, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(rows) * cols;
  broadcastRowsKernel<<<blocksFor(total), kThreads, 0, stream>>>(bias, y, total, cols);
  checkLaunch("broadcastRows", total);
}

void addColumnSums(const float* m, int rows, int cols, float* sums, cudaStream_t stream) {
  columnSumsKernel<<<blocksFor(cols), kThreads, 0, stream>>>(m, rows, cols, sums);
  checkLaunch("addColumnSums", static_cast<size_t>(rows) * cols);
}

void reluForward(const float* x, float* y, size_t n, cudaStream_t stream) {
  reluForwardKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, n);
  checkLaunch("reluForward", n);
}

void reluBackward(const float* y, const float* dy, float* dx, size_t n, cudaStream_t stream) {
  reluBackwardKernel<<<blocksFor(n), kThreads, 0, stream>>>(y, dy, dx, n);
  checkLaunch("reluBackward", n);
}

void addTensors(const float* a, const float* b, float* out, size_t n, cudaStream_t stream) {
  addKernel<<<blocksFor(n), kThreads, 0, stream>>>(a, b, out, n);
  checkLaunch("addTensors", n);
}

void globalAvgPoolForward(const float* x, float* y, size_t planes, size_t hw, cudaStream_t stream) {
  avgPoolForwardKernel<<<blocksFor(planes), kThreads, 0, stream>>>(x, y, planes, hw);
  checkLaunch("globalAvgPoolForward", planes * hw);
}

void globalAvgPoolBackward(const float* dy, float* dx, size_t planes, size_t hw,
                           cudaStream_t stream) {
  avgPoolBackwardKernel<<<blocksFor(planes * hw), kThreads, 0, stream>>>(dy, dx, planes, hw);
  checkLaunch("globalAvgPoolBackward", planes * hw);
}

int batchNormSlices(int channels, size_t perChannel) {
  // About two blocks per SM of a large GPU, each slice at least 2048 values.
  const size_t byWork = (perChannel + 2047) / 2048;
  const size_t byGpu = (264 + static_cast<size_t>(channels) - 1) / channels;
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>({byWork, byGpu, 64})));
}

size_t batchNormScratch(const BatchNormArgs& a) {
  return 2 * static_cast<size_t>(a.c) * batchNormSlices(a.c, static_cast<size_t>(a.n) * a.hw);
}

void batchNormForward(const BatchNormArgs& a, const float* x, const float* gamma, const float* beta,
                      float* runningMean, float* runningVar, float* xhat, float* invStd, float* y,
                      double* scratch, cudaStream_t stream) {
  const int slices = batchNormSlices(a.c, static_cast<size_t>(a.n) * a.hw);
  const dim3 grid(slices, a.c);
  const size_t total = static_cast<size_t>(a.n) * a.c * a.hw;
  double* sums = scratch;
  double* squares = scratch + static_cast<size_t>(a.c) * slices;
  if (a.training) {
    bnSumKernel<<<grid, kThreads, 0, stream>>>(a, x, sums);
    checkLaunch("batchNorm sums", total);
    bnSquaresKernel<<<grid, kThreads, 0, stream>>>(a, x, sums, squares);
    checkLaunch("batchNorm squares", total);
  }
  bnNormalizeKernel<<<grid, kThreads, 0, stream>>>(a, x, sums, squares, gamma, beta, runningMean,
                                                   runningVar, xhat, invStd, y);
  checkLaunch("batchNorm normalize", total);
}

void batchNormBackward(const BatchNormArgs& a, const float* dy, const float* xhat,
                       const float* invStd, const float* gamma, float* dgamma, float* dbeta,
                       float* dx, double* scratch, cudaStream_t stream) {
  const int slices = batchNormSlices(a.c, static_cast<size_t>(a.n) * a.hw);
  const dim3 grid(slices, a.c);
  const size_t total = static_cast<size_t>(a.n) * a.c * a.hw;
  double* dySums = scratch;
  double* dyXhatSums = scratch + static_cast<size_t>(a.c) * slices;
  bnBackwardSumsKernel<<<grid, kThreads, 0, stream>>>(a, dy, xhat, dySums, dyXhatSums);
  checkLaunch("batchNorm backward sums", total);
  bnBackwardDxKernel<<<grid, kThreads, 0, stream>>>(a, dy, xhat, dySums, dyXhatSums, invStd, gamma,
                                                    dgamma, dbeta, dx);
  checkLaunch("batchNorm backward dx", total);
}

void softmaxCrossEntropyForward(const float* logits, const int32_t* labels, int n, int k,
                                float* probs, LossSums* result, cudaStream_t stream) {
  softmaxForwardKernel<<<1, kReduceThreads, 0, stream>>>(logits, labels, n, k, probs, result);
  checkLaunch("softmaxCrossEntropyForward", static_cast<size_t>(n) * k);
}

void softmaxCrossEntropyBackward(const float* probs, const int32_t* labels, int n, int k,
                                 float scale, float* dlogits, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(n) * k;
  softmaxBackwardKernel<<<blocksFor(total), kThreads, 0, stream>>>(
      probs, labels, n, k, scale / static_cast<float>(n), dlogits);
  checkLaunch("softmaxCrossEntropyBackward", total);
}

void sgdStep(float* params, const float* grads, float* momentumBuf, size_t n, float lr, float wd,
             float momentum, bool first, cudaStream_t stream) {
  if (n == 0) return;
  sgdKernel<<<blocksFor(n), kThreads, 0, stream>>>(params, grads, momentumBuf, n, lr, wd, momentum,
                                                   first);
  checkLaunch("sgdStep", n);
}

void adamStep(float* params, const float* grads, float* m, float* v, size_t n, const AdamArgs& a,
              cudaStream_t stream) {
  if (n == 0) return;
  adamKernel<<<blocksFor(n), kThreads, 0, stream>>>(params, grads, m, v, n, a);
  checkLaunch("adamStep", n);
}

}  // namespace braid::trainer::cuda
