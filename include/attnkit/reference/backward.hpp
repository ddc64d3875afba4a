#pragma once
// attnkit::reference::attention_backward: the gradients of attention for mask-like kinds in
// float64, from the dense formulas of ../shared/TRAINING.md (SPEC.md section 15), for tests and
// for users checking a backward result. Independent of any kernel: scores, weights and the output
// row are recomputed from q, k and v, key by key, as the forward reference computes them.

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/score_modifiers.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"

namespace attnkit::reference {

/// A std::variant of mask kinds (a Schedule layer of them).
template <class P>
struct IsMaskedPattern : std::bool_constant<MaskedPattern<P>> {};

namespace detail {

/// Gradients of L = sum_i <d_out_i, o_i> over q, k and v, for any AttentionMask `mask` of
/// `shape`, accumulated in double. Per query row i (head h, kv head h / group):
///   s_ij = f(sigma <q_i, k_j>)  (f the score modifiers: cap tanh(x / cap), then - m_h |p - j|),
///   P_ij = mu_ij exp(s_ij - lse_i),  o_i = sum_j P_ij v_j,  D_i = <d_out_i, o_i>,
///   dS_ij = P_ij (<d_out_i, v_j> - D_i),
///   d_v_j += P_ij d_out_i,  d_q_i += sigma f'(x_ij) dS_ij k_j,  d_k_j += sigma f'(x_ij) dS_ij q_i,
/// with f'(x) = 1 - tanh^2(x / cap) under soft-capping (ALiBi's and a mask's bias are constants).
/// d_k and d_v of a kv head sum over the query heads of its group. Rows with no attended key
/// contribute nothing. O(Lq Lk (D + Dv)) time per head.
template <class T, AttentionMask M>
void masked_softmax_backward_rows(const M& mask, const AttentionShape& shape, double sigma,
                                  const TensorView<const T>& q, const TensorView<const T>& k,
                                  const TensorView<const T>& v, const TensorView<const T>& d_out,
                                  const TensorView<T>& d_q, const TensorView<T>& d_k, const TensorView<T>& d_v,
                                  const ScoreModifiers& modifiers) {
  const index_t group = shape.group_size();
  const auto index = [](index_t j) { return static_cast<std::size_t>(j); };
  // Accumulators in double, [B, Hk, Lk, D] and [B, Hk, Lk, Dv], row-major.
  std::vector<double> dk(index(shape.batch * shape.kv_heads * shape.kv_len * shape.head_dim), 0.0);
  std::vector<double> dv(index(shape.batch * shape.kv_heads * shape.kv_len * shape.value_dim), 0.0);
  std::vector<int> multiplicities(index(shape.kv_len));
  std::vector<double> logits(index(shape.kv_len)), derivatives(index(shape.kv_len));
  std::vector<double> weights(index(shape.kv_len)), out_row(index(shape.value_dim)), dq(index(shape.head_dim));
  for (index_t b = 0; b < shape.batch; ++b) {
    for (index_t h = 0; h < shape.q_heads; ++h) {
      const index_t kv_head = h / group;
      const auto key_row = [&](index_t j) { return ((b * shape.kv_heads + kv_head) * shape.kv_len + j); };
      for (index_t i = 0; i < shape.q_len; ++i) {
        const T* qi = q.row(b, h, i);
        const T* gi = d_out.row(b, h, i);
        const index_t position = i + shape.kv_len - shape.q_len;
        double max_logit = -std::numeric_limits<double>::infinity();
        bool attended_any = false;
        for (index_t j = 0; j < shape.kv_len; ++j) {
          const int mu = mask.multiplicity(h, i, j);
          multiplicities[index(j)] = mu;
          if (mu == 0) continue;
          const T* kj = k.row(b, kv_head, j);
          double dot = 0;
          for (index_t d = 0; d < shape.head_dim; ++d) dot += static_cast<double>(qi[d]) * static_cast<double>(kj[d]);
          const double x = sigma * dot;
          double logit = modifiers.apply(x, h, position, j);
          // d s / d x: soft-capping's derivative; ALiBi's penalty and a mask's bias are constants.
          double derivative = 1;
          if (modifiers.softcap > 0) {
            const double t = std::tanh(x / modifiers.softcap);
            derivative = 1 - t * t;
          }
          if constexpr (requires { mask.bias(h, i, j); }) logit += static_cast<double>(mask.bias(h, i, j));
          logits[index(j)] = logit;
          derivatives[index(j)] = derivative;
          max_logit = attended_any ? std::max(max_logit, logit) : logit;
          attended_any = true;
        }
        T* dqi = d_q.row(b, h, i);
        if (!attended_any) {  // an empty row: its output is 0 whatever the inputs
          std::fill(dqi, dqi + shape.head_dim, T(0));
          continue;
        }
        double z = 0;
        for (index_t j = 0; j < shape.kv_len; ++j) {
          const int mu = multiplicities[index(j)];
          weights[index(j)] = mu == 0 ? 0.0 : static_cast<double>(mu) * std::exp(logits[index(j)] - max_logit);
          z += weights[index(j)];
        }
        std::fill(out_row.begin(), out_row.end(), 0.0);
        for (index_t j = 0; j < shape.kv_len; ++j) {
          if (multiplicities[index(j)] == 0) continue;
          weights[index(j)] /= z;
          const T* vj = v.row(b, kv_head, j);
          for (index_t d = 0; d < shape.value_dim; ++d)
            out_row[index(d)] += weights[index(j)] * static_cast<double>(vj[d]);
        }
        double row_term = 0;  // D_i
        for (index_t d = 0; d < shape.value_dim; ++d) row_term += static_cast<double>(gi[d]) * out_row[index(d)];
        std::fill(dq.begin(), dq.end(), 0.0);
        for (index_t j = 0; j < shape.kv_len; ++j) {
          if (multiplicities[index(j)] == 0) continue;
          const double p = weights[index(j)];
          const T* vj = v.row(b, kv_head, j);
          const T* kj = k.row(b, kv_head, j);
          double dp = 0;
          double* dvj = dv.data() + index(key_row(j) * shape.value_dim);
          for (index_t d = 0; d < shape.value_dim; ++d) {
            dp += static_cast<double>(gi[d]) * static_cast<double>(vj[d]);
            dvj[d] += p * static_cast<double>(gi[d]);
          }
          const double dx = sigma * derivatives[index(j)] * p * (dp - row_term);
          double* dkj = dk.data() + index(key_row(j) * shape.head_dim);
          for (index_t d = 0; d < shape.head_dim; ++d) {
            dq[index(d)] += dx * static_cast<double>(kj[d]);
            dkj[d] += dx * static_cast<double>(qi[d]);
          }
        }
        for (index_t d = 0; d < shape.head_dim; ++d) dqi[d] = static_cast<T>(dq[index(d)]);
      }
    }
  }
  for (index_t b = 0; b < shape.batch; ++b)
    for (index_t g = 0; g < shape.kv_heads; ++g)
      for (index_t j = 0; j < shape.kv_len; ++j) {
        const index_t row = (b * shape.kv_heads + g) * shape.kv_len + j;
        for (index_t d = 0; d < shape.head_dim; ++d)
          d_k(b, g, j, d) = static_cast<T>(dk[index(row * shape.head_dim + d)]);
        for (index_t d = 0; d < shape.value_dim; ++d)
          d_v(b, g, j, d) = static_cast<T>(dv[index(row * shape.value_dim + d)]);
      }
}

/// The backward call's arguments: the forward's rules for q, k, v and the options, d_out of
/// out's shape, each gradient of its input's shape, no gradient overlapping an input, d_out or
/// another gradient. Returns the shape.
template <class T>
AttentionShape validate_backward_call(const TensorView<const T>& q, const TensorView<const T>& k,
                                      const TensorView<const T>& v, const TensorView<const T>& d_out,
                                      const TensorView<T>& d_q, const TensorView<T>& d_k, const TensorView<T>& d_v,
                                      const Options& options) {
  using attnkit::detail::reject_overlap;
  using attnkit::detail::require_same_sizes;
  const AttentionShape shape = attnkit::detail::validate_inputs(q, k, v);
  attnkit::detail::validate_output("d_out", d_out, shape);
  const TensorView<T> gradients[] = {d_q, d_k, d_v};
  const char* names[] = {"d_q", "d_k", "d_v"};
  const TensorView<const T> inputs[] = {q, k, v};
  const char* input_names[] = {"q", "k", "v"};
  for (std::size_t g = 0; g < 3; ++g) {
    attnkit::detail::validate_view(names[g], gradients[g], 1);
    require_same_sizes(names[g], TensorView<const T>(gradients[g]), input_names[g], inputs[g]);
  }
  for (std::size_t g = 0; g < 3; ++g) {
    for (std::size_t i = 0; i < 3; ++i) reject_overlap(names[g], gradients[g], input_names[i], inputs[i]);
    reject_overlap(names[g], gradients[g], "d_out", d_out);
    for (std::size_t other = g + 1; other < 3; ++other)
      reject_overlap(names[g], gradients[g], names[other], gradients[other]);
  }
  attnkit::detail::validate_key_lengths(false, options, shape);
  if (options.quantized_query) {
    attnkit::detail::reject("options.quantized_query", "true",
                            "applies to attention over a q8_0_block KV cache, not to a backward call");
  }
  attnkit::detail::validate_scale_and_threads(options);
  return shape;
}

}  // namespace detail

/// The gradients d_q [B, Hq, Lq, D], d_k [B, Hk, Lk, D] and d_v [B, Hk, Lk, Dv] of
/// L = sum <d_out, out> for out = attnkit::attention(pattern, q, k, v, options), computed
/// straight from the definition in double and stored as T (float or double). Mask kinds and
/// their combinations (a Schedule layer of them too), with the score modifiers of SPEC.md
/// section 14. Bad arguments throw attnkit::invalid_argument before anything is written.
template <class P, KernelScalar T>
requires MaskedPattern<P> || kAllAlternatives<P, IsMaskedPattern>
void attention_backward(const P& pattern, std::type_identity_t<TensorView<const T>> q,
                        std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
                        std::type_identity_t<TensorView<const T>> d_out, TensorView<T> d_q, TensorView<T> d_k,
                        TensorView<T> d_v, const Options& options = {}) {
  const AttentionShape shape = detail::validate_backward_call<T>(q, k, v, d_out, d_q, d_k, d_v, options);
  const ScoreModifiers modifiers =
      attnkit::detail::validate_score_modifiers(options.softcap, options.alibi_slopes, shape.q_heads);
  const double sigma = attnkit::detail::resolve_scale(options, shape);
  visit_pattern(pattern, [&](const auto& held) {
    detail::masked_softmax_backward_rows<T>(held.mask(shape), shape, sigma, q, k, v, d_out, d_q, d_k, d_v, modifiers);
  });
}

}  // namespace attnkit::reference
