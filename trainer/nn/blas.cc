#include "trainer/nn/blas.h"

#include <cblas.h>
#include <omp.h>

#include "common/error.h"

namespace braid::trainer {

void gemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  BRAID_ENFORCE(m >= 0 && n >= 0 && k >= 0, ErrorCode::kInvalidUsage,
                "gemm: negative size m={} n={} k={}", m, n, k);
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void setBlasThreads(int threads) {
  BRAID_ENFORCE(threads >= 1, ErrorCode::kInvalidUsage, "setBlasThreads: {} threads", threads);
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);  // oneDNN's convolutions run on OpenMP
}

int blasThreads() { return openblas_get_num_threads(); }

}  // namespace braid::trainer
