#pragma once
// attnkit::attention with Longformer's separate global projections Qg, Kg, Vg (SPEC.md
// section 4): the global rows attend every key through their own projections.

#include <algorithm>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"
#include "attnkit/kernel/tiled_driver.hpp"
#include "attnkit/parallel/team.hpp"
#include "attnkit/pattern/full.hpp"

namespace attnkit {

/// The global rows' own query, key and value tensors, shaped like q, k and v.
template <class T>
struct GlobalProjections {
  TensorView<const T> q, k, v;
};

namespace detail {

/// dst [B, H, g, C] (contiguous) = rows `tokens` of src [B, H, L, C].
template <class T>
void gather_rows(const TensorView<const T>& src, const std::vector<index_t>& tokens, std::vector<T>& dst) {
  const index_t width = src.dim();
  T* next = dst.data();
  for (index_t b = 0; b < src.batch(); ++b)
    for (index_t h = 0; h < src.heads(); ++h)
      for (index_t token : tokens) next = std::copy(src.row(b, h, token), src.row(b, h, token) + width, next);
}

/// Rows `tokens` of dst [B, H, L, C] = src [B, H, g, C] (contiguous): the inverse of gather_rows.
template <class T>
void scatter_rows(const std::vector<T>& src, const std::vector<index_t>& tokens, const TensorView<T>& dst) {
  const index_t width = dst.dim();
  const T* next = src.data();
  for (index_t b = 0; b < dst.batch(); ++b)
    for (index_t h = 0; h < dst.heads(); ++h)
      for (index_t token : tokens) {
        std::copy(next, next + width, dst.row(b, h, token));
        next += width;
      }
}

/// Two tiled passes in one parallel region: every row through the pattern's plan with q, k,
/// v, then the gathered global rows of Qg through full attention over Kg, Vg, whose outputs
/// (and lse) replace those rows'. The passes take the same per-thread scratch, so each is
/// built by one thread (Team::single) once the previous one is done.
template <class T, AttentionPattern P>
  requires KeyTilePlan<decltype(std::declval<const P&>().plan(AttentionShape{}, TileShape{}))>
void run_with_global_projections(const P& pattern, const TensorView<const T>& q, const TensorView<const T>& k,
                                 const TensorView<const T>& v, const GlobalProjections<T>& global,
                                 const TensorView<T>& out, const TensorView<T>* lse, const Options& options) {
  // Everything is validated, and planned, before anything is written.
  const AttentionShape shape = validate_call<T>(q, k, v, out, lse, options);
  require_same_sizes("global.q", global.q, "q", q);
  require_same_sizes("global.k", global.k, "k", k);
  require_same_sizes("global.v", global.v, "v", v);
  validate_call<T>(global.q, global.k, global.v, out, lse, options);
  validate_key_lengths(false, options, shape);
  const TileShape tiles = kernel::default_tile_shape<T>();
  const AttentionCall<T> call = make_call<T>(shape, q, k, v, out, lse, options);
  const auto local_plan = pattern.plan(shape, tiles);

  const std::vector<index_t>& tokens = pattern.global_tokens();
  const index_t g = static_cast<index_t>(tokens.size());
  std::vector<T> queries(static_cast<std::size_t>(shape.batch * shape.q_heads * g * shape.head_dim));
  std::vector<T> outputs(static_cast<std::size_t>(shape.batch * shape.q_heads * g * shape.value_dim));
  std::vector<T> lses(static_cast<std::size_t>(shape.batch * shape.q_heads * g));
  gather_rows(global.q, tokens, queries);
  const TensorView<T> global_lse = bhld(lses.data(), shape.batch, shape.q_heads, g, 1);
  AttentionCall<T> global_call = call;
  global_call.shape.q_len = g;
  global_call.q = bhld(static_cast<const T*>(queries.data()), shape.batch, shape.q_heads, g, shape.head_dim);
  global_call.k = global.k;
  global_call.v = global.v;
  global_call.out = bhld(outputs.data(), shape.batch, shape.q_heads, g, shape.value_dim);
  global_call.lse = lse != nullptr ? &global_lse : nullptr;
  const Full::Plan global_plan = Full{}.plan(global_call.shape, tiles);

  std::optional<kernel::TiledPass<T, std::remove_cvref_t<decltype(local_plan)>>> local_pass;
  std::optional<kernel::TiledPass<T, Full::Plan>> global_pass;
  parallel::parallel_region(call.threads, [&](parallel::Team& team) {
    team.single([&] { local_pass.emplace(call, local_plan, tiles); });
    local_pass->run(team);
    team.single([&] {
      local_pass.reset();
      global_pass.emplace(global_call, global_plan, tiles);
    });
    global_pass->run(team);
  });
  scatter_rows(outputs, tokens, out);
  if (lse != nullptr) scatter_rows(lses, tokens, *lse);
}

}  // namespace detail

/// Longformer attention with separate global projections (SPEC.md section 4): rows i in the
/// pattern's global tokens G get o_i = softmax_j(sigma <qg_i, kg_j>) vg_j over all keys j;
/// every other row follows the pattern with q, k, v (global keys included, read from k and v).
/// global.q, global.k and global.v have the shapes of q, k and v. Costs one extra full pass
/// over the g global rows (2 g Lk (D + Dv) FLOP per head), in the same parallel region;
/// otherwise as attnkit::attention.
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
