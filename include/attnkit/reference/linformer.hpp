#pragma once
// Linformer's float64 reference (SPEC.md section 8): the projections in Acc, then a dense
// softmax over the kp projected keys.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attnkit/core/options.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"
#include "attnkit/pattern/linformer.hpp"
#include "attnkit/reference/own_reference.hpp"

namespace attnkit::reference {

template <>
struct OwnReference<Linformer> {
  /// Per (batch, kv head): K'[r] = sum_{j < len_b} E[r][j] k_j and V'[r] = sum_j F[r][j] v_j
  /// (len_b = the valid keys; padded rows are skipped, which equals zeroing them), then per
  /// query row z_r = sigma <q_i, K'[r]>, o_i = sum_r exp(z_r - M) V'[r] / sum_r exp(z_r - M),
  /// lse_i = M + log sum_r exp(z_r - M), M = max_r z_r. O(B Hk kp Lk (D + Dv) + B Hq Lq kp
  /// (D + Dv)) time, O(kp (D + Dv)) extra memory.
  template <class Acc, class T>
  static void evaluate(const Linformer& pattern, const TensorView<const T>& q, const TensorView<const T>& k,
                       const TensorView<const T>& v, const TensorView<T>& out, const TensorView<T>* lse,
                       const Options& options) {
    const AttentionShape shape = attnkit::detail::validate_call<T>(q, k, v, out, lse, options);
    attnkit::detail::validate_key_lengths(true, options, shape);
    pattern.validate(shape);
    const index_t kp = pattern.kp(), n_max = pattern.n_max(), dim = shape.head_dim, value_dim = shape.value_dim;
    const Acc sigma = static_cast<Acc>(attnkit::detail::resolve_scale(options, shape));
    std::vector<Acc> keys(static_cast<std::size_t>(kp * dim)), values(static_cast<std::size_t>(kp * value_dim));
    std::vector<Acc> logits(static_cast<std::size_t>(kp)), acc(static_cast<std::size_t>(value_dim));
    for (index_t b = 0; b < shape.batch; ++b) {
      const index_t valid = options.key_lengths.empty() ? shape.kv_len : options.key_lengths[static_cast<std::size_t>(b)];
      for (index_t kv_head = 0; kv_head < shape.kv_heads; ++kv_head) {
        const float* e = pattern.key_projection(kv_head);
        const float* f = pattern.value_projection(kv_head);
        std::fill(keys.begin(), keys.end(), Acc(0));
        std::fill(values.begin(), values.end(), Acc(0));
        for (index_t r = 0; r < kp; ++r) {
          for (index_t j = 0; j < valid; ++j) {
            const Acc er = static_cast<Acc>(e[r * n_max + j]), fr = static_cast<Acc>(f[r * n_max + j]);
            const T* kj = k.row(b, kv_head, j);
            const T* vj = v.row(b, kv_head, j);
            for (index_t d = 0; d < dim; ++d) keys[static_cast<std::size_t>(r * dim + d)] += er * static_cast<Acc>(kj[d]);
            for (index_t d = 0; d < value_dim; ++d) values[static_cast<std::size_t>(r * value_dim + d)] += fr * static_cast<Acc>(vj[d]);
          }
        }
        for (index_t h = kv_head * shape.group_size(); h < (kv_head + 1) * shape.group_size(); ++h) {
          for (index_t i = 0; i < shape.q_len; ++i) {
            const T* qi = q.row(b, h, i);
            Acc max_logit = -std::numeric_limits<Acc>::infinity();
            for (index_t r = 0; r < kp; ++r) {
              Acc dot = 0;
              for (index_t d = 0; d < dim; ++d) dot += static_cast<Acc>(qi[d]) * keys[static_cast<std::size_t>(r * dim + d)];
              logits[static_cast<std::size_t>(r)] = sigma * dot;
              max_logit = std::max(max_logit, sigma * dot);
            }
            std::fill(acc.begin(), acc.end(), Acc(0));
            Acc z = 0;
            for (index_t r = 0; r < kp; ++r) {
              const Acc weight = std::exp(logits[static_cast<std::size_t>(r)] - max_logit);
              z += weight;
              for (index_t d = 0; d < value_dim; ++d) acc[static_cast<std::size_t>(d)] += weight * values[static_cast<std::size_t>(r * value_dim + d)];
            }
            T* oi = out.row(b, h, i);
            for (index_t d = 0; d < value_dim; ++d) oi[d] = static_cast<T>(acc[static_cast<std::size_t>(d)] / z);
            if (lse != nullptr) *lse->row(b, h, i) = static_cast<T>(max_logit + std::log(z));
          }
        }
      }
    }
  }
};

}  // namespace attnkit::reference
