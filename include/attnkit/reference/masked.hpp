#pragma once
// The dense float64 reference for mask-like kinds, written from SPEC.md section 0.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/score_modifiers.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"

namespace attnkit::reference {
namespace detail {

/// Row by row, accumulating in `Acc` (double for the reference; the tests also instantiate
/// Acc = float as the naive same-precision yardstick of SPEC.md section 11), straight from
/// the definition, for any AttentionMask `mask` of `shape`:
///   s_ij = sigma <q_i, k_j>, then the score modifiers of SPEC.md section 14 in double (query
///   row i at position i + Lk - Lq) (+ mask.bias(h, i, j) when the mask has one: LSH's self penalty),  Z_i = sum_j
///   mu_ij exp(s_ij - M_i),  o_i = sum_j mu_ij exp(s_ij - M_i) v_j / Z_i, lse_i = M_i + log Z_i,  M_i = max over
///   attended j of s_ij (any finite shift gives the
/// same o_i; the max avoids overflow). Keys with mu_ij = 0 are never read. O(Lq Lk (D + Dv))
/// time, O(Lk + Dv) extra memory (one row of multiplicities and logits, one accumulator). K and V may hold
/// another type than Q (Linformer's reference passes its projections in Acc).
template <class Acc, class T, class KV, AttentionMask M>
void masked_softmax_rows(const M& mask, const AttentionShape& shape, Acc sigma, const TensorView<const T>& q,
                         const TensorView<const KV>& k, const TensorView<const KV>& v, const TensorView<T>& out,
                         const TensorView<T>* lse, const ScoreModifiers& modifiers = {}) {
  const index_t group = shape.group_size();
  std::vector<int> multiplicities(static_cast<std::size_t>(shape.kv_len));
  std::vector<Acc> logits(static_cast<std::size_t>(shape.kv_len));
  std::vector<Acc> acc(static_cast<std::size_t>(shape.value_dim));
  for (index_t b = 0; b < shape.batch; ++b) {
    for (index_t h = 0; h < shape.q_heads; ++h) {
      const index_t kv_head = h / group;
      for (index_t i = 0; i < shape.q_len; ++i) {
        const T* qi = q.row(b, h, i);
        Acc max_logit = -std::numeric_limits<Acc>::infinity();
        bool attended_any = false;
        for (index_t j = 0; j < shape.kv_len; ++j) {
          const int mu = mask.multiplicity(h, i, j);
          multiplicities[static_cast<std::size_t>(j)] = mu;
          if (mu == 0) continue;
          const KV* kj = k.row(b, kv_head, j);
          Acc dot = 0;
          for (index_t d = 0; d < shape.head_dim; ++d) dot += static_cast<Acc>(qi[d]) * static_cast<Acc>(kj[d]);
          Acc logit = sigma * dot;
          if (modifiers.active()) {
            logit = static_cast<Acc>(modifiers.apply(static_cast<double>(logit), h, i + shape.kv_len - shape.q_len, j));
          }
          if constexpr (requires { mask.bias(h, i, j); }) logit += static_cast<Acc>(mask.bias(h, i, j));
          logits[static_cast<std::size_t>(j)] = logit;
          max_logit = attended_any ? std::max(max_logit, logit) : logit;
          attended_any = true;
        }
        T* oi = out.row(b, h, i);
        if (!attended_any) {  // empty row: zeros and -inf, never NaN
          for (index_t d = 0; d < shape.value_dim; ++d) oi[d] = T(0);
          if (lse != nullptr) *lse->row(b, h, i) = -std::numeric_limits<T>::infinity();
          continue;
        }
        std::fill(acc.begin(), acc.end(), Acc(0));
        Acc z = 0;
        for (index_t j = 0; j < shape.kv_len; ++j) {
          const int mu = multiplicities[static_cast<std::size_t>(j)];
          if (mu == 0) continue;
          const Acc weight = static_cast<Acc>(mu) * std::exp(logits[static_cast<std::size_t>(j)] - max_logit);
          z += weight;
          const KV* vj = v.row(b, kv_head, j);
          for (index_t d = 0; d < shape.value_dim; ++d)
            acc[static_cast<std::size_t>(d)] += weight * static_cast<Acc>(vj[d]);
        }
        for (index_t d = 0; d < shape.value_dim; ++d) oi[d] = static_cast<T>(acc[static_cast<std::size_t>(d)] / z);
        if (lse != nullptr) *lse->row(b, h, i) = static_cast<T>(max_logit + std::log(z));
      }
    }
  }
}

/// The pattern's mask through masked_softmax_rows, after validating the call.
template <class Acc, class T, MaskedPattern P>
void dense_attention(const P& pattern, const TensorView<const T>& q, const TensorView<const T>& k,
                     const TensorView<const T>& v, const TensorView<T>& out, const TensorView<T>* lse,
                     const Options& options) {
  const AttentionShape shape = attnkit::detail::validate_call<T>(q, k, v, out, lse, options);
  attnkit::detail::validate_key_lengths(false, options, shape);
  const ScoreModifiers modifiers =
      attnkit::detail::validate_score_modifiers(options.softcap, options.alibi_slopes, shape.q_heads);
  masked_softmax_rows<Acc>(pattern.mask(shape), shape, static_cast<Acc>(attnkit::detail::resolve_scale(options, shape)),
                           q, k, v, out, lse, modifiers);
}

}  // namespace detail
}  // namespace attnkit::reference
