#pragma once
// Eigen convenience overloads of attnkit::attention for one
// head: row-major matrices q [Lq x D], k [Lk x D], v [Lk x Dv], out [Lq x Dv].

#include <Eigen/Core>

#include "attnkit/attention.hpp"

namespace attnkit {

/// Row-major dynamic matrix: one row per token, the layout attnkit reads without copies.
template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

namespace detail {

/// A row-major Eigen block as a [1, 1, rows, cols] TensorView.
template <class T, class Ref>
TensorView<T> single_head_view(Ref& matrix) {
  return TensorView<T>(matrix.data(), {1, 1, matrix.rows(), matrix.cols()}, {0, 0, matrix.outerStride(), 1});
}

}  // namespace detail

/// One head through the tiled kernels. Column-major inputs are accepted (Eigen copies them
/// into a row-major temporary); `out` must be row-major with contiguous rows.
template <AttentionPattern P>
void attention(const P& pattern, const Eigen::Ref<const RowMatrix<float>>& q,
               const Eigen::Ref<const RowMatrix<float>>& k, const Eigen::Ref<const RowMatrix<float>>& v,
               Eigen::Ref<RowMatrix<float>> out, const Options& options = {}) {
  attention(pattern, detail::single_head_view<const float>(q), detail::single_head_view<const float>(k),
            detail::single_head_view<const float>(v), detail::single_head_view<float>(out), options);
}

template <AttentionPattern P>
void attention(const P& pattern, const Eigen::Ref<const RowMatrix<double>>& q,
               const Eigen::Ref<const RowMatrix<double>>& k, const Eigen::Ref<const RowMatrix<double>>& v,
               Eigen::Ref<RowMatrix<double>> out, const Options& options = {}) {
  attention(pattern, detail::single_head_view<const double>(q), detail::single_head_view<const double>(k),
            detail::single_head_view<const double>(v), detail::single_head_view<double>(out), options);
}

}  // namespace attnkit
