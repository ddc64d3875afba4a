#pragma once
// The decode driver (SPEC.md section 13): every query row's attended keys from the pattern's
// mask, work items of (sequence, kv head or all kv heads, chunk of keys) over the chunks some
// row attends, one parallel region computing the items' partial results, then their merge in
// chunk order.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "attnkit/cache/sequence_pattern.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/q8_block.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/kernel/decode_call.hpp"
#include "attnkit/kernel/decode_chunk.hpp"
#include "attnkit/kernel/lse_merge.hpp"
#include "attnkit/parallel/team.hpp"
#include "attnkit/simd/convert.hpp"

namespace attnkit::kernel {

/// The attended keys of every query row: sequence b's rows are those of the pattern for its
/// lengths[b] tokens (sequence_prefix), evaluated by its mask on the square lengths[b] x
/// lengths[b] shape at positions lengths[b] - rows(b) + i; rows at negative positions attend
/// nothing, and so do the rows of sequences on the prefill schedule (not evaluated here). The
/// pattern's rules for that shape throw here, before anything is written.
template <MaskedPattern P>
DecodeSpans decode_spans(const P& pattern, const DecodeGeometry& call) {
  DecodeSpans result;
  result.offsets.reserve(static_cast<std::size_t>(call.q_heads * call.query_offsets.back() + 1));
  for (index_t b = 0; b < call.batch; ++b) {
    const index_t length = call.lengths[static_cast<std::size_t>(b)], rows = call.rows(b);
    if (length == 0 || !call.on_decode_schedule(b)) {
      result.offsets.insert(result.offsets.end(), static_cast<std::size_t>(call.q_heads * rows),
                            static_cast<index_t>(result.spans.size()));
      continue;
    }
    const AttentionShape shape{1, call.q_heads, call.kv_heads, length, length, call.head_dim, call.value_dim};
    const auto mask = sequence_prefix(pattern, length).mask(shape);
    for (index_t h = 0; h < call.q_heads; ++h)
      for (index_t i = 0; i < rows; ++i) {
        const index_t position = length - rows + i;
        if (position >= 0) {
          mask.for_each_span(h, position, [&](const KeyRange& span) {
            if (!result.spans.empty() && static_cast<index_t>(result.spans.size()) > result.offsets.back() &&
                result.spans.back().end == span.begin) {
              result.spans.back().end = span.end;  // adjacent runs (blocks) join
            } else {
              result.spans.push_back(span);
            }
          });
        }
        result.offsets.push_back(static_cast<index_t>(result.spans.size()));
      }
  }
  return result;
}

/// One work item: the group rows of kv heads `heads` in sequence b against key chunk `chunk`.
struct DecodeItem {
  index_t b;
  HeadRange heads;
  index_t chunk;
};

/// The work items of a call, over the chunks holding a key some row of the items' groups
/// attends (a window of 4096 keys over a 131072-key cache makes 9 items per head range, not
/// 256), in order of (sequence, head range, chunk); head ranges of heads_per_item heads (1 or
/// Hk); first[b * ranges + range] is the first item of (b, range), first's last entry the item
/// count.
struct DecodeItems {
  index_t heads_per_item;
  std::vector<DecodeItem> items;
  std::vector<index_t> first;
};

inline DecodeItems decode_items(const DecodeGeometry& call, const DecodeSpans& spans, index_t heads_per_item) {
  DecodeItems result{heads_per_item, {}, {}};
  std::vector<char> touched;
  for (index_t b = 0; b < call.batch; ++b) {
    const index_t chunks = attnkit::detail::ceil_div(call.lengths[static_cast<std::size_t>(b)], kDecodeChunkKeys);
    for (index_t g = 0; g < call.kv_heads; g += heads_per_item) {
      result.first.push_back(static_cast<index_t>(result.items.size()));
      touched.assign(static_cast<std::size_t>(chunks), 0);
      for (index_t h = g * call.group(); h < (g + heads_per_item) * call.group(); ++h)
        for (index_t i = 0; i < call.rows(b); ++i)
          for (const KeyRange& span : spans.row(call.row_id(b, h, i)))
            std::fill(touched.begin() + span.begin / kDecodeChunkKeys,
                      touched.begin() + (span.end - 1) / kDecodeChunkKeys + 1, 1);
      for (index_t c = 0; c < chunks; ++c)
        if (touched[static_cast<std::size_t>(c)] != 0) result.items.push_back(DecodeItem{b, {g, heads_per_item}, c});
    }
  }
  result.first.push_back(static_cast<index_t>(result.items.size()));
  return result;
}

/// The 8-bit query mode's rows (SPEC.md section 13): query row `id`, widened to float
/// (`widened`, D floats of scratch) and unscaled, quantized block by block with the cache's rule
/// (quantize_q8_0) into blocks[id * D / 32 ...], with its scales times `score_scale` and its
/// offsets (-128 times each block's sum of values; simd::Q8Queries).
template <class Q>
void quantize_query_row(const Q* row, index_t head_dim, float score_scale, float* widened, q8_0_block* blocks,
                        float* scales, std::int32_t* offsets) {
  simd::widen_row(row, head_dim, widened);
  for (index_t c = 0; c < head_dim / q8_0_block::kValues; ++c) {
    blocks[c] = quantize_q8_0(widened + c * q8_0_block::kValues);
    std::int32_t sum = 0;
    for (const std::int8_t value : blocks[c].values) sum += value;
    scales[c] = to_float(blocks[c].scale) * score_scale;
    offsets[c] = -128 * sum;
  }
}

/// Runs a validated call over a cache for its sequences on the decode schedule
/// (DecodeGeometry::on_decode_schedule; the rows of the others are not touched): q (element type Q) against
/// the cache's rows (E) into out (Out) and lse (or null), laid out as the geometry says, scores
/// scaled by `scale` and changed by `modifiers`, in one parallel region of `threads`: the query
/// rows widened and scaled once (or, with quantized_query, quantized: quantize_query_row),
/// each item's partial results (decode_chunk, compiled once per cache type) written to its
/// own slot, then per (sequence, kv head) the slots merged in chunk order
/// (kernel::merge_partial), narrowed into out, lse into lse.
template <class Q, class E, class Out>
void run_decode(const DecodeGeometry& geometry, const attnkit::detail::CacheRows<const E>& cache,
                const TensorView<const Q>& q, const TensorView<Out>& out, const TensorView<float>* lse, float scale,
                const ScoreModifiers& modifiers, bool quantized_query, int threads, const DecodeSpans& spans) {
  const index_t value_dim = geometry.value_dim, head_dim = geometry.head_dim, q_heads = geometry.q_heads;
  const index_t heads_per_item = cache.heads_share_pages() ? geometry.kv_heads : 1;
  const DecodeItems work = decode_items(geometry, spans, heads_per_item);

  // Every query row widened, scaled by sigma log2(e), zero past D (row_id order).
  const index_t query_stride = attnkit::detail::round_up(head_dim, static_cast<index_t>(simd::kWidth<float>));
  const index_t query_rows = q_heads * geometry.query_offsets.back();
  float* queries = attnkit::detail::thread_scratch<struct DecodeCallQueriesTag, float>(
      std::max<index_t>(1, query_rows * query_stride));
  DecodeCall<E> call{geometry, cache, queries, query_stride, modifiers};
  const float q_scale = scale * kLog2e<float>;
  // The 8-bit query mode's rows: blocks, scales and offsets, row by row (simd::Q8Queries).
  const index_t row_blocks = head_dim / q8_0_block::kValues,
                query_blocks = quantized_query ? query_rows * row_blocks : 0;
  q8_0_block* blocks = nullptr;
  float* block_scales = nullptr;
  std::int32_t* block_offsets = nullptr;
  if (quantized_query) {
    // Raw bytes (q8_0_block's float16 is not trivially default-constructible; the block, an
    // aggregate, lives in the allocation as soon as it is written).
    blocks =
        reinterpret_cast<q8_0_block*>(attnkit::detail::thread_scratch<struct DecodeQuantizedBlocksTag, unsigned char>(
            query_blocks * static_cast<index_t>(sizeof(q8_0_block))));
    block_scales = attnkit::detail::thread_scratch<struct DecodeQuantizedScalesTag, float>(query_blocks);
    block_offsets = attnkit::detail::thread_scratch<struct DecodeQuantizedOffsetsTag, std::int32_t>(query_blocks);
    call.quantized = {blocks, block_scales, block_offsets, row_blocks};
  }

  // Slot of item k from slot_begin[k]: [item rows x Dv] partial rows, then [item rows] lse;
  // item rows are the group rows of its heads_per_item heads, head by head.
  const auto item_rows = [&](const DecodeItem& item) { return heads_per_item * geometry.group_rows(item.b); };
  std::vector<index_t> slot_begin(work.items.size() + 1, 0);
  for (std::size_t k = 0; k < work.items.size(); ++k)
    slot_begin[k + 1] = slot_begin[k] + item_rows(work.items[k]) * (value_dim + 1);
  float* partials =
      attnkit::detail::thread_scratch<struct DecodePartialsTag, float>(std::max<index_t>(1, slot_begin.back()));
  parallel::parallel_region(threads, [&](parallel::Team& team) {
    const parallel::FlushToZero flush;  // subnormal weights cost assists (parallel/team.hpp)
    team.for_each_static(geometry.batch * q_heads, [&](index_t sequence_head) {
      const index_t b = sequence_head / q_heads, h = sequence_head % q_heads;
      if (!geometry.on_decode_schedule(b)) return;
      for (index_t i = 0; i < geometry.rows(b); ++i) {
        const index_t id = geometry.row_id(b, h, i);
        const auto* source = q.row(geometry.view_batch(b), h, geometry.view_row(b, i));
        float* row = queries + id * query_stride;
        if (quantized_query) {
          const index_t at = id * row_blocks;
          quantize_query_row(source, head_dim, q_scale, row, blocks + at, block_scales + at, block_offsets + at);
          continue;
        }
        simd::widen_row(source, head_dim, row);
        for (index_t d = 0; d < head_dim; ++d) row[d] *= q_scale;
        std::fill(row + head_dim, row + query_stride, 0.0f);
      }
    });
    team.for_each_dynamic(static_cast<index_t>(work.items.size()), [&](index_t k) {
      const DecodeItem& item = work.items[static_cast<std::size_t>(k)];
      const index_t length = geometry.lengths[static_cast<std::size_t>(item.b)];
      const KeyRange chunk{item.chunk * kDecodeChunkKeys, std::min(length, (item.chunk + 1) * kDecodeChunkKeys)};
      float* own = partials + slot_begin[static_cast<std::size_t>(k)];
      decode_chunk(call, spans, item.b, item.heads, chunk, own, own + item_rows(item) * value_dim);
    });
    team.for_each_static(geometry.batch * geometry.kv_heads, [&](index_t group_index) {
      const index_t b = group_index / geometry.kv_heads, g = group_index % geometry.kv_heads;
      if (!geometry.on_decode_schedule(b)) return;
      float* merged = attnkit::detail::thread_scratch<struct DecodeMergeTag, float>(value_dim);
      // The items of g's head range, and g's rows in their slots.
      const index_t range = b * (geometry.kv_heads / heads_per_item) + g / heads_per_item;
      const index_t rows = geometry.group_rows(b), first_row = g % heads_per_item * rows;
      for (index_t r = 0; r < rows; ++r) {
        float row_lse = -std::numeric_limits<float>::infinity();
        for (index_t k = work.first[static_cast<std::size_t>(range)];
             k < work.first[static_cast<std::size_t>(range) + 1]; ++k) {
          const float* own = partials + slot_begin[static_cast<std::size_t>(k)];
          const index_t own_rows = item_rows(work.items[static_cast<std::size_t>(k)]);
          row_lse = merge_partial(merged, row_lse, own + (first_row + r) * value_dim,
                                  own[own_rows * value_dim + first_row + r], value_dim);
        }
        if (row_lse == -std::numeric_limits<float>::infinity()) std::fill(merged, merged + value_dim, 0.0f);
        const index_t h = g * geometry.group() + r / geometry.rows(b), i = r % geometry.rows(b);
        const index_t view_b = geometry.view_batch(b), view_i = geometry.view_row(b, i);
        simd::narrow_row(merged, value_dim, out.row(view_b, h, view_i));
        if (lse != nullptr) *lse->row(view_b, h, view_i) = row_lse;
      }
    });
  });
}

}  // namespace attnkit::kernel
