#pragma once
// attnkit::attention with Longformer's separate global projections Qg, Kg, Vg (SPEC.md
// section 4): the global rows attend every key through their own projections.

#include <string>
#include <type_traits>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"
#include "attnkit/pattern/full.hpp"

namespace attnkit {

/// The global rows' own query, key and value tensors, shaped like q, k and v.
template <class T>
struct GlobalProjections {
  TensorView<const T> q, k, v;
};

namespace detail {

template <class T>
void require_same_sizes(const char* name, const TensorView<const T>& global, const char* local_name,
                        const TensorView<const T>& local) {
  for (int axis = 0; axis < 4; ++axis) {
    if (global.size(axis) != local.size(axis)) {
      reject(std::string(name) + ".sizes[" + axis_name(axis) + "]", global.size(axis),
             "must equal " + std::string(local_name) + ".sizes[" + axis_name(axis) + "] = " +
                 std::to_string(local.size(axis)));
    }
  }
}

/// Copies rows `tokens` of src [B, H, L, C] into dst [B, H, g, C] (contiguous), or back when
/// `to_rows` is true.
template <class T, class U>
void move_rows(const TensorView<U>& rows, const std::vector<index_t>& tokens, std::vector<T>& packed, bool to_rows) {
  const index_t g = static_cast<index_t>(tokens.size()), width = rows.dim();
  std::size_t e = 0;
  for (index_t b = 0; b < rows.batch(); ++b)
    for (index_t h = 0; h < rows.heads(); ++h)
      for (index_t t = 0; t < g; ++t, e += static_cast<std::size_t>(width)) {
        auto* row = rows.row(b, h, tokens[static_cast<std::size_t>(t)]);
        if constexpr (!std::is_const_v<U>) {
          if (to_rows) {
            std::copy(packed.data() + e, packed.data() + e + width, row);
            continue;
          }
        }
        std::copy(row, row + width, packed.data() + e);
      }
}

template <class T, AttentionPattern P>
void run_with_global_projections(const P& pattern, const TensorView<const T>& q, const TensorView<const T>& k,
                                 const TensorView<const T>& v, const GlobalProjections<T>& global,
                                 const TensorView<T>& out, const TensorView<T>* lse, const Options& options) {
  // Everything is validated before anything is written.
  const AttentionShape shape = validate_call<T>(q, k, v, out, lse, options);
  require_same_sizes("global.q", global.q, "q", q);
  require_same_sizes("global.k", global.k, "k", k);
  require_same_sizes("global.v", global.v, "v", v);
  validate_call<T>(global.q, global.k, global.v, out, lse, options);
  (void)pattern.cost(shape);  // the pattern's own checks (token range)

  // Pass 1: every row with the local projections (global rows are recomputed in pass 2).
  run_attention<T>(pattern, q, k, v, out, lse, options);
  // Pass 2: the global rows attend every key through Qg, Kg, Vg.
  const std::vector<index_t>& tokens = pattern.global_tokens();
  const index_t g = static_cast<index_t>(tokens.size());
  if (g == 0) return;
  std::vector<T> queries(static_cast<std::size_t>(shape.batch * shape.q_heads * g * shape.head_dim));
  std::vector<T> outputs(static_cast<std::size_t>(shape.batch * shape.q_heads * g * shape.value_dim));
  std::vector<T> lses(static_cast<std::size_t>(shape.batch * shape.q_heads * g));
  move_rows(global.q, tokens, queries, false);
  const TensorView<T> lse_rows = bhld(lses.data(), shape.batch, shape.q_heads, g, 1);
  run_attention<T>(Full{}, bhld(static_cast<const T*>(queries.data()), shape.batch, shape.q_heads, g, shape.head_dim),
                   global.k, global.v, bhld(outputs.data(), shape.batch, shape.q_heads, g, shape.value_dim),
                   lse != nullptr ? &lse_rows : nullptr, options);
  move_rows(out, tokens, outputs, true);
  if (lse != nullptr) move_rows(*lse, tokens, lses, true);
}

}  // namespace detail

/// Longformer attention with separate global projections (SPEC.md section 4): rows i in the
/// pattern's global tokens G get o_i = softmax_j(sigma <qg_i, kg_j>) vg_j over all keys j;
/// every other row follows the pattern with q, k, v (global keys included, read from k and v).
/// global.q, global.k and global.v have the shapes of q, k and v. Costs one extra full pass
/// over the g global rows (2 g Lk (D + Dv) FLOP per head); otherwise as attnkit::attention.
template <AttentionPattern P, KernelScalar T>
  requires WithGlobalTokens<P>
void attention(const P& pattern, std::type_identity_t<TensorView<const T>> q,
               std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
               const GlobalProjections<T>& global, TensorView<T> out, const Options& options = {}) {
  detail::run_with_global_projections<T>(pattern, q, k, v, global, out, nullptr, options);
}

/// As above, and also the log-sum-exp of every row (see attnkit::attention).
template <AttentionPattern P, KernelScalar T>
  requires WithGlobalTokens<P>
void attention(const P& pattern, std::type_identity_t<TensorView<const T>> q,
               std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
               const GlobalProjections<T>& global, TensorView<T> out, TensorView<T> lse, const Options& options = {}) {
  detail::run_with_global_projections<T>(pattern, q, k, v, global, out, &lse, options);
}

}  // namespace attnkit
