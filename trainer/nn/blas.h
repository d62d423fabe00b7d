// Thin row-major wrapper over OpenBLAS sgemm, the only heavy math of the trainer's layers.
#pragma once

namespace braid::trainer {

/// C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, all row-major; op transposes when the
/// flag is set (then A is stored [K,M], B is stored [N,K]). lda/ldb/ldc are row strides.
void gemm(bool transA, bool transB, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

/// Sets the number of OpenBLAS and OpenMP (oneDNN) threads for this process (1 per rank when
/// ranks == cores).
void setBlasThreads(int threads);
/// The number of threads OpenBLAS uses now.
int blasThreads();

}  // namespace braid::trainer
