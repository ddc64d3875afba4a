#pragma once
// Linformer's float64 reference (SPEC.md section 8): the projections in Acc, then a dense
// softmax over the kp projected keys.

#include <vector>

#include "attnkit/core/options.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/linformer.hpp"
#include "attnkit/reference/masked.hpp"
#include "attnkit/reference/own_reference.hpp"

namespace attnkit::reference {

template <>
struct OwnReference<Linformer> {
  /// Per (batch, kv head): K'[r] = sum_{j < len_b} E[r][j] k_j and V'[r] = sum_j F[r][j] v_j
  /// in Acc (len_b = the valid keys; padded rows are skipped, which equals zeroing them), then
  /// the dense softmax of every query row over the kp projected keys (masked_softmax_rows
  /// with the full mask). O(B Hk kp Lk (D + Dv) + B Hq Lq kp (D + Dv)) time,
  /// O(B Hk kp (D + Dv)) extra memory.
  template <class Acc, class T>
  static void evaluate(const Linformer& pattern, const TensorView<const T>& q, const TensorView<const T>& k,
                       const TensorView<const T>& v, const TensorView<T>& out, const TensorView<T>* lse,
                       const Options& options) {
    const AttentionShape shape = attnkit::detail::validate_call<T>(q, k, v, out, lse, options);
    attnkit::detail::validate_key_lengths(true, options, shape);
    pattern.validate(shape);
    const index_t kp = pattern.kp(), n_max = pattern.n_max(), dim = shape.head_dim, value_dim = shape.value_dim;
    std::vector<Acc> keys(static_cast<std::size_t>(shape.batch * shape.kv_heads * kp * dim), Acc(0));
    std::vector<Acc> values(static_cast<std::size_t>(shape.batch * shape.kv_heads * kp * value_dim), Acc(0));
    const TensorView<Acc> projected_keys = bhld(keys.data(), shape.batch, shape.kv_heads, kp, dim);
    const TensorView<Acc> projected_values = bhld(values.data(), shape.batch, shape.kv_heads, kp, value_dim);
    for (index_t b = 0; b < shape.batch; ++b) {
      const index_t valid =
          options.key_lengths.empty() ? shape.kv_len : options.key_lengths[static_cast<std::size_t>(b)];
      for (index_t h = 0; h < shape.kv_heads; ++h) {
        const float* e = pattern.key_projection(h);
        const float* f = pattern.value_projection(h);
        for (index_t r = 0; r < kp; ++r) {
          Acc* key = projected_keys.row(b, h, r);
          Acc* value = projected_values.row(b, h, r);
          for (index_t j = 0; j < valid; ++j) {
            const T* kj = k.row(b, h, j);
            const T* vj = v.row(b, h, j);
            for (index_t d = 0; d < dim; ++d) key[d] += static_cast<Acc>(e[r * n_max + j]) * static_cast<Acc>(kj[d]);
            for (index_t d = 0; d < value_dim; ++d)
              value[d] += static_cast<Acc>(f[r * n_max + j]) * static_cast<Acc>(vj[d]);
          }
        }
      }
    }
    AttentionShape projected = shape;
    projected.kv_len = kp;
    detail::masked_softmax_rows<Acc>(
        Full{}.mask(projected), projected, static_cast<Acc>(attnkit::detail::resolve_scale(options, shape)), q,
        TensorView<const Acc>(projected_keys), TensorView<const Acc>(projected_values), out, lse);
  }
};

}  // namespace attnkit::reference
