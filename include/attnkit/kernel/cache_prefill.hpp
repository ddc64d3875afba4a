#pragma once
// Attention over a KV cache with many query rows per sequence (chunked prefill, prefix caching,
// long speculative drafts; SPEC.md section 13): the prefill schedule, query tiles x key tiles
// of the tiled driver, instead of decode's one pass over the keys per group of rows.

#include <algorithm>
#include <limits>
#include <type_traits>

#include "attnkit/cache/cache_rows.hpp"
#include "attnkit/cache/sequence_pattern.hpp"
#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/plan_call.hpp"
#include "attnkit/core/q8_block.hpp"
#include "attnkit/core/score_modifiers.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/detail/aligned_buffer.hpp"
#include "attnkit/kernel/decode_call.hpp"
#include "attnkit/kernel/execute.hpp"
#include "attnkit/parallel/team.hpp"
#include "attnkit/simd/convert.hpp"
#include "attnkit/simd/widening_load.hpp"

namespace attnkit::kernel {

/// Query row i of sequence b as the 8-bit query mode reads it (SPEC.md section 13): each block
/// of 32 float values quantized by the cache's rule and read back as d * q_i (exact in float),
/// so float scores of these rows are the mode's formula up to float rounding.
inline void quantize_and_restore(float* row, index_t head_dim) {
  for (index_t c = 0; c < head_dim; c += q8_0_block::kValues) dequantize_q8_0(quantize_q8_0(row + c), row + c);
}

/// Runs a validated call over a cache for its sequences on the prefill schedule (more than
/// kDecodeScheduleRows rows; the rows of the others are not touched), sequence by sequence:
/// the sequence's K and V rows of every kv head widened to float ([1, Hk, len, D] and Dv,
/// gathered page by page, dequantized for 8-bit blocks), its query rows widened to float
/// (quantized and restored in the 8-bit query mode), then the tiled driver on the square
/// len x len call with AttentionCall::first_query = len - rows, so that its rows are exactly
/// the last rows of the prefill call on the sequence's first len tokens (the same bits), the
/// pattern cut to the sequence (sequence_prefix). Rows at negative positions get 0 and lse
/// -inf. One float call type for every element type, so the driver is compiled once per
/// pattern (the float tensor call's). Every sequence's plan is built before anything is
/// written (a rule broken for one length throws with nothing written). Extra memory:
/// 4 Hk len (D + Dv) bytes for the widened K and V, plus q, out and lse of one sequence in float.
template <MaskedPattern P, class Q, class E, class Out>
void run_cache_prefill(const P& pattern, const DecodeGeometry& geometry,
                       const attnkit::detail::CacheRows<const E>& cache, const TensorView<const Q>& q,
                       const TensorView<Out>& out, const TensorView<float>* lse, float scale,
                       const ScoreModifiers& modifiers, bool quantized_query, int threads) {
  const index_t q_heads = geometry.q_heads, kv_heads = geometry.kv_heads;
  const index_t head_dim = geometry.head_dim, value_dim = geometry.value_dim;
  const TileShape tiles{};
  const auto square = [&](index_t length) {
    return AttentionShape{1, q_heads, kv_heads, length, length, head_dim, value_dim};
  };
  const auto prefilled = [&](index_t b) {
    return !geometry.on_decode_schedule(b) && geometry.lengths[static_cast<std::size_t>(b)] > 0;
  };
  // Every sequence's plan first: plans are built from the shape (these views are not read).
  for (index_t b = 0; b < geometry.batch; ++b) {
    if (!prefilled(b)) continue;
    const index_t length = geometry.lengths[static_cast<std::size_t>(b)];
    const AttentionCall<float> shape_only{square(length), {}, {}, {}, {}, nullptr, scale, threads};
    static_cast<void>(plan_call(sequence_prefix(pattern, length), shape_only, tiles));
  }
  for (index_t b = 0; b < geometry.batch; ++b) {
    if (geometry.on_decode_schedule(b)) continue;
    const index_t length = geometry.lengths[static_cast<std::size_t>(b)], view_b = geometry.view_batch(b);
    const index_t rows = std::min(geometry.rows(b), length), empty_rows = geometry.rows(b) - rows;
    for (index_t h = 0; h < q_heads; ++h)
      for (index_t i = 0; i < empty_rows; ++i) {  // before the sequence's first token
        Out* row = out.row(view_b, h, geometry.view_row(b, i));
        std::fill(row, row + value_dim, Out{});
        if (lse != nullptr) *lse->row(view_b, h, geometry.view_row(b, i)) = -std::numeric_limits<float>::infinity();
      }
    if (rows == 0) continue;

    attnkit::detail::AlignedBuffer<float> keys(kv_heads * length * head_dim), values(kv_heads * length * value_dim);
    attnkit::detail::AlignedBuffer<float> queries(q_heads * rows * head_dim);
    attnkit::detail::AlignedBuffer<float> results(std::is_same_v<Out, float> ? 0 : q_heads * rows * value_dim);
    parallel::parallel_region(threads, [&](parallel::Team& team) {
      team.for_each_static(kv_heads * length, [&](index_t id) {
        const index_t g = id / length, t = id % length;
        simd::widen_values(cache.key(b, g, t), head_dim, keys.data() + id * head_dim);
        simd::widen_values(cache.value(b, g, t), value_dim, values.data() + id * value_dim);
      });
      team.for_each_static(q_heads * rows, [&](index_t id) {
        float* row = queries.data() + id * head_dim;
        simd::widen_row(q.row(view_b, id / rows, geometry.view_row(b, empty_rows + id % rows)), head_dim, row);
        if (quantized_query) quantize_and_restore(row, head_dim);
      });
    });

    // Float out is written in place (its rows of sequence b), half out through `results`.
    const index_t first_row = geometry.view_row(b, empty_rows);
    TensorView<float> out_rows;
    if constexpr (std::is_same_v<Out, float>) {
      out_rows = TensorView<float>(out.row(view_b, 0, first_row), {1, q_heads, rows, value_dim}, out.strides());
    } else {
      out_rows = bhld(results.data(), 1, q_heads, rows, value_dim);
    }
    const TensorView<float> lse_rows =
        lse != nullptr ? TensorView<float>(lse->row(view_b, 0, first_row), {1, q_heads, rows, 1}, lse->strides())
                       : TensorView<float>();
    const AttentionCall<float> call{square(length),
                                    bhld(static_cast<const float*>(queries.data()), 1, q_heads, rows, head_dim),
                                    bhld(static_cast<const float*>(keys.data()), 1, kv_heads, length, head_dim),
                                    bhld(static_cast<const float*>(values.data()), 1, kv_heads, length, value_dim),
                                    out_rows,
                                    lse != nullptr ? &lse_rows : nullptr,
                                    scale,
                                    threads,
                                    {},
                                    modifiers,
                                    length - rows};
    execute(call, plan_call(sequence_prefix(pattern, length), call, tiles), tiles);
    if constexpr (!std::is_same_v<Out, float>) {
      for (index_t h = 0; h < q_heads; ++h)
        for (index_t i = 0; i < rows; ++i)
          simd::narrow_row(results.data() + (h * rows + i) * value_dim, value_dim,
                           out.row(view_b, h, geometry.view_row(b, empty_rows + i)));
    }
  }
}

}  // namespace attnkit::kernel
