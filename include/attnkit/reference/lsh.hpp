#pragma once
// Reformer LSH's float64 reference (SPEC.md section 7): mu_ij = sum_r M_r[i][j] built from
// given bucket ids with a plain comparison sort, then the dense softmax with the self penalty.

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>
#include <vector>

#include "attnkit/core/options.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"
#include "attnkit/pattern/lsh.hpp"
#include "attnkit/reference/masked.hpp"
#include "attnkit/reference/own_reference.hpp"

namespace attnkit::reference {
namespace detail {

/// mu of one (batch, head) as a dense [n x n] count with LSH's self penalty as its bias.
struct LshMultiplicities {
  std::vector<int> mu;
  index_t n = 0;

  int multiplicity(index_t /*head*/, index_t i, index_t j) const { return mu[static_cast<std::size_t>(i * n + j)]; }
  double bias(index_t /*head*/, index_t i, index_t j) const { return i == j ? -1e5 : 0.0; }
};

/// SPEC.md steps 2, 3 and 5 read literally: every round's rows sorted by (bucket, row) and
/// padded with empty slots to whole chunks, the rounds concatenated, and every real slot t
/// counting each real slot of the chunks t / c - before ... t / c + after (circularly over
/// the whole sequence) whose row is allowed (causal: not after t's row). n <= c: every
/// allowed pair once.
inline LshMultiplicities lsh_multiplicities(const Lsh& lsh, const LshBucketIds& ids, index_t b, index_t h) {
  const index_t n = ids.seq_len(), c = lsh.chunk, rounds = lsh.rounds;
  LshMultiplicities m{std::vector<int>(static_cast<std::size_t>(n * n), 0), n};
  const auto count = [&](index_t i, index_t j) {
    if (!lsh.causal || j <= i) ++m.mu[static_cast<std::size_t>(i * n + j)];
  };
  if (n <= c) {
    for (index_t i = 0; i < n; ++i)
      for (index_t j = 0; j < n; ++j) count(i, j);
    return m;
  }
  const index_t padded = (n + c - 1) / c * c;
  std::vector<index_t> sequence;  // row per slot, -1 for padding
  for (index_t r = 0; r < rounds; ++r) {
    std::vector<index_t> rows(static_cast<std::size_t>(n));
    std::iota(rows.begin(), rows.end(), index_t{0});
    std::sort(rows.begin(), rows.end(), [&](index_t x, index_t y) {
      return ids(b, h, r, x) != ids(b, h, r, y) ? ids(b, h, r, x) < ids(b, h, r, y) : x < y;
    });
    sequence.insert(sequence.end(), rows.begin(), rows.end());
    sequence.insert(sequence.end(), static_cast<std::size_t>(padded - n), index_t{-1});
  }
  const index_t chunks = static_cast<index_t>(sequence.size()) / c;
  for (index_t t = 0; t < static_cast<index_t>(sequence.size()); ++t) {
    const index_t i = sequence[static_cast<std::size_t>(t)];
    if (i < 0) continue;
    for (index_t offset = -lsh.before; offset <= lsh.after; ++offset) {
      const index_t chunk = ((t / c + offset) % chunks + chunks) % chunks;
      for (index_t u = chunk * c; u < (chunk + 1) * c; ++u) {
        const index_t j = sequence[static_cast<std::size_t>(u)];
        if (j >= 0) count(i, j);
      }
    }
  }
  return m;
}

/// The reference given bucket ids (from lsh.hash(q), so that kernel and reference share the
/// discontinuous bucket assignment): per (batch, head) mu from lsh_multiplicities, keys
/// x_j / ||x_j|| (0 for a zero row) and V in Acc, and masked_softmax_rows with the penalty.
/// O(n^2 (D + Dv)) time and O(n^2) memory per (batch, head).
template <class Acc, class T>
void lsh_attention(const Lsh& lsh, const LshBucketIds& ids, const TensorView<const T>& q, const TensorView<const T>& k,
                   const TensorView<const T>& v, const TensorView<T>& out, const TensorView<T>* lse,
                   const Options& options) {
  const AttentionShape shape = attnkit::detail::validate_call<T>(q, k, v, out, lse, options);
  attnkit::detail::validate_key_lengths(false, options, shape);
  lsh.validate(shape);
  Lsh::require_shared_keys(q, k);
  const index_t n = shape.q_len, dim = shape.head_dim, value_dim = shape.value_dim;
  if (ids.batch() != shape.batch || ids.heads() != shape.q_heads || ids.rounds() != lsh.rounds || ids.seq_len() != n) {
    attnkit::detail::reject("ids", "another shape", "must come from lsh.hash(q) for this q and lsh.rounds");
  }
  if (n == 0) return;  // no rows (the views' data may be null: no row pointers to form)
  const Acc sigma = static_cast<Acc>(attnkit::detail::resolve_scale(options, shape));
  const AttentionShape head{1, 1, 1, n, n, dim, value_dim};
  std::vector<Acc> keys(static_cast<std::size_t>(n * dim)), values(static_cast<std::size_t>(n * value_dim));
  for (index_t b = 0; b < shape.batch; ++b) {
    for (index_t h = 0; h < shape.q_heads; ++h) {
      for (index_t j = 0; j < n; ++j) {
        // SPEC.md section 7: k_j = x_j / sqrt(||x_j||^2 + D key_epsilon).
        Acc squares = static_cast<Acc>(dim) * static_cast<Acc>(lsh.key_epsilon);
        for (index_t d = 0; d < dim; ++d) squares += static_cast<Acc>(q(b, h, j, d)) * static_cast<Acc>(q(b, h, j, d));
        const Acc inverse = squares > 0 ? Acc(1) / std::sqrt(squares) : Acc(0);
        for (index_t d = 0; d < dim; ++d)
          keys[static_cast<std::size_t>(j * dim + d)] = static_cast<Acc>(q(b, h, j, d)) * inverse;
        for (index_t d = 0; d < value_dim; ++d)
          values[static_cast<std::size_t>(j * value_dim + d)] = static_cast<Acc>(v(b, h, j, d));
      }
      const TensorView<T>* head_lse = nullptr;
      TensorView<T> lse_view;
      if (lse != nullptr) {
        lse_view = TensorView<T>(lse->row(b, h, 0), {1, 1, n, 1}, lse->strides());
        head_lse = &lse_view;
      }
      masked_softmax_rows<Acc>(lsh_multiplicities(lsh, ids, b, h), head, sigma,
                               TensorView<const T>(q.row(b, h, 0), {1, 1, n, dim}, q.strides()),
                               TensorView<const Acc>(bhld(keys.data(), 1, 1, n, dim)),
                               TensorView<const Acc>(bhld(values.data(), 1, 1, n, value_dim)),
                               TensorView<T>(out.row(b, h, 0), {1, 1, n, value_dim}, out.strides()), head_lse);
    }
  }
}

}  // namespace detail

template <>
struct OwnReference<Lsh> {
  /// Hashes q by lsh.hash (as attention does), then detail::lsh_attention with those ids.
  template <class Acc, class T>
  static void evaluate(const Lsh& pattern, const TensorView<const T>& q, const TensorView<const T>& k,
                       const TensorView<const T>& v, const TensorView<T>& out, const TensorView<T>* lse,
                       const Options& options) {
    attnkit::detail::validate_call<T>(q, k, v, out, lse, options);
    detail::lsh_attention<Acc, T>(pattern, pattern.hash<T>(q, options), q, k, v, out, lse, options);
  }
};

/// The reference with the bucket ids given (tests of attention apart from hashing, and ids
/// from elsewhere): same contract as attnkit::attention(lsh, x, x, v, out[, lse], options).
template <KernelScalar T>
void lsh_attention(const Lsh& lsh, const LshBucketIds& ids, std::type_identity_t<TensorView<const T>> q,
                   std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
                   TensorView<T> out, const Options& options = {}) {
  detail::lsh_attention<double, T>(lsh, ids, q, k, v, out, nullptr, options);
}
template <KernelScalar T>
void lsh_attention(const Lsh& lsh, const LshBucketIds& ids, std::type_identity_t<TensorView<const T>> q,
                   std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
                   TensorView<T> out, TensorView<T> lse, const Options& options = {}) {
  detail::lsh_attention<double, T>(lsh, ids, q, k, v, out, &lse, options);
}

}  // namespace attnkit::reference
