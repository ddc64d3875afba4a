#pragma once
// The baseline a user would write with Eigen: materialise S = scale Q K^T, softmax each row,
// multiply by V. O(n^2) memory per head; Eigen threads its GEMMs with OpenMP.

#include <cmath>
#include <limits>

#include <Eigen/Core>

#include "attnkit/attnkit.hpp"
#include "attnkit/eigen.hpp"

namespace attnkit::bench {

/// q, k, v, out: contiguous [H, n, D] (B = 1). `scores` is caller-owned [n x n] scratch.
inline void naive_eigen_attention(const float* q, const float* k, const float* v, float* out, index_t heads, index_t n,
                                  index_t dim, bool causal, RowMatrix<float>& scores) {
  using Map = Eigen::Map<const RowMatrix<float>>;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  for (index_t h = 0; h < heads; ++h) {
    const index_t offset = h * n * dim;
    Map Q(q + offset, n, dim), K(k + offset, n, dim), V(v + offset, n, dim);
    Eigen::Map<RowMatrix<float>> O(out + offset, n, dim);
    scores.noalias() = (Q * K.transpose()) * scale;
    for (index_t i = 0; i < n; ++i) {
      auto row = scores.row(i);
      if (causal) row.tail(n - i - 1).setConstant(-std::numeric_limits<float>::infinity());
      row = (row.array() - row.maxCoeff()).exp();
      row /= row.sum();
    }
    O.noalias() = scores * V;
  }
}

}  // namespace attnkit::bench
