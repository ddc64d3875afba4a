#pragma once
// The float64 reference of attnkit::KernelizedRpe: SPEC.md section 9's O(n^2) sums with the
// same random features, written from the closed forms (no FFT, no feature blocks).

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attnkit/core/options.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"
#include "attnkit/pattern/kernelized_rpe.hpp"
#include "attnkit/reference/own_reference.hpp"

namespace attnkit::reference {

/// Numerator, denominator and the sizes tolerances need, of one (batch, query head):
///   w_ij = c_{j - i - (Lk - Lq)} phi_q_i . phi_k_j,  num_i = sum_j w_ij v_j,  den_i = sum_j w_ij,
///   magnitude_i = sum_j c_{j - i - (Lk - Lq)} sum_u |phi_q_i[u]| |phi_k_j[u]| (= den_i for
///   positive features; for TRF's signed features the size of the terms that cancel inside
///   each w_ij, to which a float weight's rounding is relative),
///   column_scale_i = sum_u |phi_q_i[u]| max_i' sum_j |c_{j-i'} phi_k_j[u]|: the size of the
///   largest entries of the Toeplitz columns row i's sums combine, to which the FFT path's
///   error is relative (KernelizedRpe's accuracy limit),
/// with the stabilised features of kernel::FeatureBlocks in Acc.
template <class Acc>
struct RpeSums {
  std::vector<Acc> num;  // [Lq x Dv]
  // magnitude_i = sum_j c_ij sum_u |phi_u(q_i)| |phi_u(k_j)|: the size of the terms a float
  // kernel adds (sum_j |w_ij| for the positive maps; larger where trigonometric features cancel
  // inside w_ij); column_scale: the FFT path's column bound.
  std::vector<Acc> den, magnitude, column_scale;
};

template <class Acc, class T>
RpeSums<Acc> kernelized_rpe_sums(const KernelizedRpe& rpe, const TensorView<const T>& q, const TensorView<const T>& k,
                                 const TensorView<const T>& v, index_t b, index_t h, double sigma) {
  const index_t lq = q.seq(), lk = k.seq(), dim = q.dim(), dv = v.dim(), m = rpe.features;
  const index_t kv_head = h / (q.heads() / k.heads());
  const index_t features = feature_count(rpe.map, m);
  const std::vector<double> w = rpe.feature_matrix(h, dim);
  const bool trig = rpe.map == FeatureMap::kTrigonometric;
  // x' and the raw projections, per side.
  const auto scaled = [&](const T* x, bool key) {
    double square = 0;
    for (index_t d = 0; d < dim; ++d) square += static_cast<double>(x[d]) * static_cast<double>(x[d]);
    double rho = (key && sigma < 0 ? -1.0 : 1.0) * std::sqrt(std::abs(sigma));
    if (rpe.map == FeatureMap::kNormalizedPositive) {
      rho = 1.0 / (std::max(std::sqrt(square), 1e-12) * std::sqrt(rpe.temperature));
    }
    std::vector<Acc> e(static_cast<std::size_t>(features));
    for (index_t u = 0; u < features; ++u) {
      Acc dot = 0;
      for (index_t d = 0; d < dim; ++d)
        dot += static_cast<Acc>(w[static_cast<std::size_t>((u % m) * dim + d)]) * static_cast<Acc>(x[d]);
      e[static_cast<std::size_t>(u)] = static_cast<Acc>(rho) * dot;
    }
    return std::pair{e, static_cast<Acc>(0.5 * rho * rho * square)};
  };
  std::vector<std::vector<Acc>> phi_q(static_cast<std::size_t>(lq)), phi_k(static_cast<std::size_t>(lk));
  std::vector<Acc> key_half_square(static_cast<std::size_t>(lk));
  Acc key_max = -std::numeric_limits<Acc>::infinity();
  for (index_t j = 0; j < lk; ++j) {
    auto [e, half_square] = scaled(k.row(b, kv_head, j), true);
    key_half_square[static_cast<std::size_t>(j)] = half_square;
    if (trig) {
      key_max = std::max(key_max, half_square);
    } else {
      for (Acc x : e) key_max = std::max(key_max, x - half_square);
    }
    phi_k[static_cast<std::size_t>(j)] = std::move(e);
  }
  for (index_t j = 0; j < lk; ++j) {
    auto& e = phi_k[static_cast<std::size_t>(j)];
    const Acc half_square = key_half_square[static_cast<std::size_t>(j)];
    for (index_t u = 0; u < features; ++u) {
      Acc& x = e[static_cast<std::size_t>(u)];
      x = trig ? std::exp(half_square - key_max) * (u < m ? std::cos(x) : std::sin(x))
               : std::exp(x - half_square - key_max);
    }
  }
  for (index_t i = 0; i < lq; ++i) {
    auto e = scaled(q.row(b, h, i), false).first;
    const Acc row_max = *std::max_element(e.begin(), e.end());
    for (index_t u = 0; u < features; ++u) {
      Acc& x = e[static_cast<std::size_t>(u)];
      x = trig ? (u < m ? std::cos(x) : std::sin(x)) : std::exp(x - row_max);
    }
    phi_q[static_cast<std::size_t>(i)] = std::move(e);
  }
  const auto zeros = [](index_t count) { return std::vector<Acc>(static_cast<std::size_t>(count), Acc(0)); };
  RpeSums<Acc> sums{zeros(lq * dv), zeros(lq), zeros(lq), zeros(lq)};
  std::vector<Acc> column_max = zeros(features), column = zeros(features);
  const double bias_max = rpe.bias.max_value(h);
  for (index_t i = 0; i < lq; ++i) {
    std::fill(column.begin(), column.end(), Acc(0));
    for (index_t j = 0; j < lk; ++j) {
      const index_t offset = j - i - (lk - lq);
      if (rpe.causal && offset > 0) continue;
      const Acc c = static_cast<Acc>(std::exp(rpe.bias.at(h, offset) - bias_max));
      Acc dot = 0, absolute_dot = 0;
      for (index_t u = 0; u < features; ++u) {
        const Acc key = phi_k[static_cast<std::size_t>(j)][static_cast<std::size_t>(u)];
        const Acc product = phi_q[static_cast<std::size_t>(i)][static_cast<std::size_t>(u)] * key;
        dot += product;
        absolute_dot += std::abs(product);
        column[static_cast<std::size_t>(u)] += std::abs(c * key);
      }
      sums.magnitude[static_cast<std::size_t>(i)] += c * absolute_dot;
      const Acc weight = c * dot;
      const T* vj = v.row(b, kv_head, j);
      for (index_t d = 0; d < dv; ++d)
        sums.num[static_cast<std::size_t>(i * dv + d)] += weight * static_cast<Acc>(vj[d]);
      sums.den[static_cast<std::size_t>(i)] += weight;
    }
    for (index_t u = 0; u < features; ++u) {
      column_max[static_cast<std::size_t>(u)] =
          std::max(column_max[static_cast<std::size_t>(u)], column[static_cast<std::size_t>(u)]);
    }
  }
  for (index_t i = 0; i < lq; ++i) {
    for (index_t u = 0; u < features; ++u) {
      sums.column_scale[static_cast<std::size_t>(i)] +=
          std::abs(phi_q[static_cast<std::size_t>(i)][static_cast<std::size_t>(u)]) *
          column_max[static_cast<std::size_t>(u)];
    }
  }
  return sums;
}

template <>
struct OwnReference<KernelizedRpe> {
  /// o_i = num_i / den_i (0 where den_i is exactly 0) per (batch, query head) from
  /// kernelized_rpe_sums. O(B Hq Lq Lk (m' + Dv)) time, O((Lq + Lk) m' + Lq Dv) extra memory.
  template <class Acc, class T>
  static void evaluate(const KernelizedRpe& pattern, const TensorView<const T>& q, const TensorView<const T>& k,
                       const TensorView<const T>& v, const TensorView<T>& out, const TensorView<T>* lse,
                       const Options& options) {
    const AttentionShape shape = attnkit::detail::validate_call<T>(q, k, v, out, lse, options);
    attnkit::detail::validate_key_lengths(false, options, shape);
    pattern.validate(shape);
    if (lse != nullptr)
      attnkit::detail::reject("lse", "given", "KernelizedRpe computes no log-sum-exp; call without lse");
    const double sigma = attnkit::detail::resolve_scale(options, shape);
    for (index_t b = 0; b < shape.batch; ++b) {
      for (index_t h = 0; h < shape.q_heads; ++h) {
        const RpeSums<Acc> sums = kernelized_rpe_sums<Acc>(pattern, q, k, v, b, h, sigma);
        for (index_t i = 0; i < shape.q_len; ++i) {
          const Acc den = sums.den[static_cast<std::size_t>(i)];
          T* o = out.row(b, h, i);
          for (index_t d = 0; d < shape.value_dim; ++d) {
            o[d] = den == Acc(0) ? T(0)
                                 : static_cast<T>(sums.num[static_cast<std::size_t>(i * shape.value_dim + d)] / den);
          }
        }
      }
    }
  }
};

}  // namespace attnkit::reference
