#pragma once
// kernel::gemm_accumulate: C += A B on the calling thread, through Eigen's blocked GEMM.

#include <Eigen/Core>

#include "attnkit/core/index.hpp"

namespace attnkit::kernel {

/// C [rows x cols] += A [rows x depth] * B [depth x cols]; A and B row-major with row strides
/// lda, ldb (elements) and unit column stride; C row-major with row stride ldc, or, with
/// kColumnMajorResult, column-major with column stride ldc (C^T row-major: LSH's hashing
/// scans the rotated values of many rows per column). Runs on the calling thread only.
///
/// This is Eigen's GEMM (operand packing plus its register-blocked gebp micro-kernel, for the
/// instruction set the build targets) entered below Eigen's parallelizer: a product
/// expression evaluated outside an OpenMP region starts Eigen's own team of
/// omp_get_max_threads() threads, which would ignore Options::threads and nest regions inside
/// attnkit's. The cache blocking depends only on (rows, cols, depth) and the CPU's cache
/// sizes, so a result depends only on its inputs and the build, never on the thread count.
/// Uses Eigen 3.4's internal entry point (general_matrix_matrix_product::run with no
/// parallel info), which is what Eigen's own product evaluator calls for one thread.
template <class T, bool kColumnMajorResult = false>
void gemm_accumulate(index_t rows, index_t cols, index_t depth, const T* a, index_t lda, const T* b, index_t ldb, T* c,
                     index_t ldc) {
  if (rows == 0 || cols == 0 || depth == 0) return;
  using Index = Eigen::Index;
  constexpr int kResultOrder = kColumnMajorResult ? Eigen::ColMajor : Eigen::RowMajor;
  using Blocking =
      Eigen::internal::gemm_blocking_space<kResultOrder, T, T, Eigen::Dynamic, Eigen::Dynamic, Eigen::Dynamic>;
  using Product = Eigen::internal::general_matrix_matrix_product<Index, T, Eigen::RowMajor, false, T, Eigen::RowMajor,
                                                                 false, kResultOrder, 1>;
  Blocking blocking(rows, cols, depth, 1, true);
  Product::run(rows, cols, depth, a, lda, b, ldb, c, 1, ldc, T(1), blocking, nullptr);
}

}  // namespace attnkit::kernel
