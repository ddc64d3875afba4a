#pragma once
// kernel::LinformerPlan: the executable plan of attnkit::Linformer (SPEC.md section 8).

#include <concepts>

#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/kernel/linformer_projection.hpp"
#include "attnkit/kernel/tiled_driver.hpp"
#include "attnkit/parallel/team.hpp"

namespace attnkit::kernel {

/// Runs one Linformer call in one parallel region: the team projects K' = E K and V' = F V
/// for every (batch, kv head) into scratch [B, Hk, kp, D] and [B, Hk, kp, Dv] (taken from the
/// calling thread's scratch and reused across calls), then runs the tiled driver with
/// `projected_plan` (the pattern's choice: full attention over the kp keys) for Q over the
/// projected keys. Nothing is O(Lq Lk): extra memory is B Hk kp (D + Dv) elements plus the
/// driver's panels of kp keys. Half K and V widen as they are projected: K', V' are T.
template <class T, KeyTilePlan ProjectedPlan>
class LinformerPlan {
 public:
  LinformerPlan(index_t kp, index_t n_max, ProjectionMatrices e, ProjectionMatrices f, const TileShape& tiles,
                ProjectedPlan projected_plan)
      : kp_(kp), n_max_(n_max), e_(e), f_(f), tiles_(tiles), projected_plan_(projected_plan) {}

  template <class Call>
  requires std::same_as<typename Call::value_type, T>
  void execute(const Call& call) const {
    const AttentionShape& shape = call.shape;
    T* keys = attnkit::detail::thread_scratch<struct ProjectedKeysTag, T>(shape.batch * shape.kv_heads * kp_ *
                                                                          shape.head_dim);
    T* values = attnkit::detail::thread_scratch<struct ProjectedValuesTag, T>(shape.batch * shape.kv_heads * kp_ *
                                                                              shape.value_dim);
    const TensorView<T> projected_keys = bhld(keys, shape.batch, shape.kv_heads, kp_, shape.head_dim);
    const TensorView<T> projected_values = bhld(values, shape.batch, shape.kv_heads, kp_, shape.value_dim);
    const SequenceProjection<T, typename Call::key_value_type> projection(
        kp_, n_max_, e_, f_, call.k, call.v, projected_keys, projected_values, call.key_lengths);

    // softmax(sigma Q K'^T) V' over the kp projected keys
    AttentionShape projected_shape = shape;
    projected_shape.kv_len = kp_;
    const AttentionCall<T, typename Call::input_type, typename Call::output_type, T> projected{
        projected_shape, call.q, projected_keys, projected_values, call.out, call.lse, call.scale, call.threads, {}};
    TiledPass<decltype(projected), ProjectedPlan> pass(projected, projected_plan_, tiles_);
    parallel::parallel_region(call.threads, [&](parallel::Team& team) {
      team.for_each_dynamic(projection.items(), [&](index_t item) { projection.run_item(item); });
      pass.run(team);  // for_each_dynamic ends with a barrier: every projection is written
    });
  }

 private:
  index_t kp_, n_max_;
  ProjectionMatrices e_, f_;
  TileShape tiles_;
  ProjectedPlan projected_plan_;
};

}  // namespace attnkit::kernel
