#pragma once
// kernel::gemm_accumulate: C += A B on the calling thread, through Eigen's blocked GEMM.

#include <Eigen/Core>

#include "attnkit/core/index.hpp"

namespace attnkit::kernel {

/// C [rows x cols] += A [rows x depth] * B [depth x cols]; all three row-major with row
/// strides lda, ldb, ldc (elements) and unit column stride. Runs on the calling thread only.
///
/// This is Eigen's GEMM (operand packing plus its register-blocked gebp micro-kernel, for the
/// instruction set the build targets) entered below Eigen's parallelizer: a product
/// expression evaluated outside an OpenMP region starts Eigen's own team of
/// omp_get_max_threads() threads, which would ignore Options::threads and nest regions inside
/// attnkit's. The cache blocking depends only on (rows, cols, depth) and the CPU's cache
/// sizes, so a result depends only on its inputs and the build, never on the thread count.
/// Uses Eigen 3.4's internal entry point (general_matrix_matrix_product::run with no
/// parallel info), which is what Eigen's own product evaluator calls for one thread.
template <class T>
void gemm_accumulate(index_t rows, index_t cols, index_t depth, const T* a, index_t lda, const T* b, index_t ldb, T* c,
                     index_t ldc) {
  if (rows == 0 || cols == 0 || depth == 0) return;
  using Index = Eigen::Index;
  using Blocking =
      Eigen::internal::gemm_blocking_space<Eigen::RowMajor, T, T, Eigen::Dynamic, Eigen::Dynamic, Eigen::Dynamic>;
  using Product = Eigen::internal::general_matrix_matrix_product<Index, T, Eigen::RowMajor, false, T, Eigen::RowMajor,
                                                                 false, Eigen::RowMajor, 1>;
  Blocking blocking(rows, cols, depth, 1, true);
  Product::run(rows, cols, depth, a, lda, b, ldb, c, 1, ldc, T(1), blocking, nullptr);
}

}  // namespace attnkit::kernel
