#pragma once
// Attention over a KV cache with many query rows per sequence (chunked prefill, prefix caching,
// long speculative drafts; SPEC.md section 13): the prefill schedule, query tiles x key tiles
// of the tiled driver, instead of decode's one pass over the keys per group of rows.

#include <algorithm>

#include "attnkit/cache/sequence_pattern.hpp"
#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/plan_call.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/detail/aligned_buffer.hpp"
#include "attnkit/kernel/cache_call.hpp"
#include "attnkit/kernel/decode_call.hpp"
#include "attnkit/kernel/execute.hpp"

namespace attnkit::kernel {

/// Runs a validated call over a cache for its sequences on the prefill schedule (more than
/// kDecodeScheduleRows rows; the rows of the others are not touched), sequence by sequence:
/// the sequence's K, V and query rows widened to float (CacheCall::widen_sequence), then the
/// tiled driver on the square len x len call with AttentionCall::first_query = len - rows, so
/// that its rows are exactly the last rows of the prefill call on the sequence's first len
/// tokens (the same bits), the pattern cut to the sequence (sequence_prefix), its results
/// stored into out (CacheCall::store_rows). Rows at negative positions get 0 and lse -inf. One
/// float call type for every element type, so the driver is compiled once per pattern (the
/// float tensor call's), and this function too (the element types are the CacheCall's).
/// Every sequence's plan is built before anything is written (a rule broken for one length
/// throws with nothing written). Extra memory: 4 Hk len (D + Dv) bytes for the widened K and
/// V, plus q and out of one sequence in float.
template <MaskedPattern P>
void run_cache_prefill(const P& pattern, const CacheCall& call, int threads) {
  const DecodeGeometry& geometry = call.geometry();
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
    const AttentionCall<float> shape_only{square(length), {}, {}, {}, {}, nullptr, call.scale(), threads};
    static_cast<void>(plan_call(sequence_prefix(pattern, length), shape_only, tiles));
  }
  for (index_t b = 0; b < geometry.batch; ++b) {
    if (geometry.on_decode_schedule(b)) continue;
    const index_t length = geometry.lengths[static_cast<std::size_t>(b)];
    const index_t rows = std::min(geometry.rows(b), length), empty_rows = geometry.rows(b) - rows;
    call.write_empty_rows(b, empty_rows);  // before the sequence's first token
    if (rows == 0) continue;

    attnkit::detail::AlignedBuffer<float> keys(kv_heads * length * head_dim), values(kv_heads * length * value_dim);
    attnkit::detail::AlignedBuffer<float> queries(q_heads * rows * head_dim), results(q_heads * rows * value_dim);
    call.widen_sequence(b, empty_rows, rows, keys.data(), values.data(), queries.data(), threads);
    const TensorView<float>* lse = call.lse();
    const index_t first_row = geometry.view_row(b, empty_rows);
    const TensorView<float> lse_rows =
        lse != nullptr ? lse->rows(geometry.view_batch(b), first_row, rows) : TensorView<float>();
    const AttentionCall<float> square_call{
        square(length),
        bhld(static_cast<const float*>(queries.data()), 1, q_heads, rows, head_dim),
        bhld(static_cast<const float*>(keys.data()), 1, kv_heads, length, head_dim),
        bhld(static_cast<const float*>(values.data()), 1, kv_heads, length, value_dim),
        bhld(results.data(), 1, q_heads, rows, value_dim),
        lse != nullptr ? &lse_rows : nullptr,
        call.scale(),
        threads,
        {},
        call.modifiers(),
        length - rows};
    execute(square_call, plan_call(sequence_prefix(pattern, length), square_call, tiles), tiles);
    call.store_rows(b, empty_rows, rows, results.data());
  }
}

}  // namespace attnkit::kernel
