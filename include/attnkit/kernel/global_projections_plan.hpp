#pragma once
// kernel::GlobalProjectionsPlan: the executable plan of attnkit::WithGlobalProjections
// (Longformer's separate global projections, SPEC.md section 4).

#include <algorithm>
#include <concepts>
#include <optional>
#include <utility>
#include <vector>

#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/kernel/tiled_driver.hpp"
#include "attnkit/parallel/team.hpp"

namespace attnkit::kernel {

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

}  // namespace detail

/// Runs a call with global projections in one parallel region, as two tiled passes: every
/// row through `local_plan` (the pattern's) with q, k, v, then the gathered global rows of Qg
/// through `global_plan` (full attention, planned for g rows) over Kg, Vg, whose outputs (and
/// lse) replace those rows'. The passes take the same per-thread scratch, so each is built by
/// one thread (Team::single) once the previous one is done. Extra memory: the g gathered rows
/// of Qg and their outputs, B Hq g (D + Dv + 1) elements, plus the passes' own. T is the
/// element type of q, k, v and of the projections.
template <class T, KeyTilePlan LocalPlan, KeyTilePlan GlobalPlan>
class GlobalProjectionsPlan {
 public:
  GlobalProjectionsPlan(LocalPlan local_plan, GlobalPlan global_plan, GlobalProjections<T> global,
                        std::vector<index_t> tokens, const TileShape& tiles)
      : local_plan_(local_plan),
        global_plan_(global_plan),
        global_(global),
        tokens_(std::move(tokens)),
        tiles_(tiles) {}

  template <class Call>
  requires std::same_as<typename Call::input_type, T> && std::same_as<typename Call::key_value_type, T>
  void execute(const Call& call) const {
    using Output = typename Call::output_type;
    using Compute = typename Call::value_type;
    const AttentionShape& shape = call.shape;
    const index_t g = static_cast<index_t>(tokens_.size());
    std::vector<T> queries(static_cast<std::size_t>(shape.batch * shape.q_heads * g * shape.head_dim));
    std::vector<Output> outputs(static_cast<std::size_t>(shape.batch * shape.q_heads * g * shape.value_dim));
    std::vector<Compute> lses(static_cast<std::size_t>(shape.batch * shape.q_heads * g));
    detail::gather_rows(global_.q, tokens_, queries);
    const TensorView<Compute> global_lse = bhld(lses.data(), shape.batch, shape.q_heads, g, 1);
    Call global_call = call;
    global_call.shape.q_len = g;
    global_call.q = bhld(static_cast<const T*>(queries.data()), shape.batch, shape.q_heads, g, shape.head_dim);
    global_call.k = global_.k;
    global_call.v = global_.v;
    global_call.out = bhld(outputs.data(), shape.batch, shape.q_heads, g, shape.value_dim);
    global_call.lse = call.lse != nullptr ? &global_lse : nullptr;

    std::optional<TiledPass<Call, LocalPlan>> local_pass;
    std::optional<TiledPass<Call, GlobalPlan>> global_pass;
    parallel::parallel_region(call.threads, [&](parallel::Team& team) {
      team.single([&] { local_pass.emplace(call, local_plan_, tiles_); });
      local_pass->run(team);
      team.single([&] {
        local_pass.reset();
        global_pass.emplace(global_call, global_plan_, tiles_);
      });
      global_pass->run(team);
    });
    detail::scatter_rows(outputs, tokens_, call.out);
    if (call.lse != nullptr) detail::scatter_rows(lses, tokens_, *call.lse);
  }

 private:
  LocalPlan local_plan_;
  GlobalPlan global_plan_;
  GlobalProjections<T> global_;
  std::vector<index_t> tokens_;
  TileShape tiles_;
};

}  // namespace attnkit::kernel
