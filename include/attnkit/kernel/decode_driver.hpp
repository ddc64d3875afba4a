#pragma once
// The decode driver (SPEC.md section 13): every query row's attended keys from the pattern's
// mask, work items of (sequence, kv head, chunk of keys) over the chunks some row attends,
// one parallel region computing the items' partial results, then their merge in chunk order.

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "attnkit/cache/sequence_pattern.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/index.hpp"
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
/// lengths[b] shape at positions lengths[b] - Lq + i; rows at negative positions attend
/// nothing. The pattern's rules for that shape throw here, before anything is written.
template <MaskedPattern P, class Q, class E, class Out>
DecodeSpans decode_spans(const P& pattern, const DecodeCall<Q, E, Out>& call) {
  DecodeSpans result;
  result.offsets.reserve(static_cast<std::size_t>(call.batch * call.q_heads * call.q_len + 1));
  for (index_t b = 0; b < call.batch; ++b) {
    const index_t length = call.lengths[static_cast<std::size_t>(b)];
    if (length == 0) {
      result.offsets.insert(result.offsets.end(), static_cast<std::size_t>(call.q_heads * call.q_len),
                            static_cast<index_t>(result.spans.size()));
      continue;
    }
    const AttentionShape shape{1, call.q_heads, call.kv_heads, length, length, call.head_dim, call.value_dim};
    const auto mask = sequence_prefix(pattern, length).mask(shape);
    for (index_t h = 0; h < call.q_heads; ++h)
      for (index_t i = 0; i < call.q_len; ++i) {
        const index_t position = length - call.q_len + i;
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

/// One work item: the group rows of kv head `kv_head` in sequence b against key chunk `chunk`.
struct DecodeItem {
  index_t b;
  index_t kv_head;
  index_t chunk;
};

/// Runs a validated decode call: items over the chunks holding a key some row of the group
/// attends (a window of 4096 keys over a 131072-key cache makes 9 items per kv head, not 256),
/// each written to its own slot of partial results; then per (sequence, kv head) the slots
/// merge in chunk order (kernel::merge_partial), narrowed into out, lse into lse.
template <class Q, class E, class Out>
void run_decode(const DecodeCall<Q, E, Out>& call, const DecodeSpans& spans) {
  const index_t rows = call.group_rows(), value_dim = call.value_dim;
  std::vector<DecodeItem> items;
  std::vector<index_t> first_item;  // per (b, kv head), and one past the last
  std::vector<char> touched;
  for (index_t b = 0; b < call.batch; ++b) {
    const index_t chunks = attnkit::detail::ceil_div(call.lengths[static_cast<std::size_t>(b)], kDecodeChunkKeys);
    for (index_t g = 0; g < call.kv_heads; ++g) {
      first_item.push_back(static_cast<index_t>(items.size()));
      touched.assign(static_cast<std::size_t>(chunks), 0);
      for (index_t h = g * call.group(); h < (g + 1) * call.group(); ++h)
        for (index_t i = 0; i < call.q_len; ++i)
          for (const KeyRange& span : spans.row(call.row_id(b, h, i)))
            std::fill(touched.begin() + span.begin / kDecodeChunkKeys,
                      touched.begin() + (span.end - 1) / kDecodeChunkKeys + 1, 1);
      for (index_t c = 0; c < chunks; ++c)
        if (touched[static_cast<std::size_t>(c)] != 0) items.push_back(DecodeItem{b, g, c});
    }
  }
  first_item.push_back(static_cast<index_t>(items.size()));

  // Slot of item k: [rows x Dv] partial rows, then [rows] lse.
  const index_t slot = rows * (value_dim + 1);
  float* partials = attnkit::detail::thread_scratch<struct DecodePartialsTag, float>(
      std::max<index_t>(1, static_cast<index_t>(items.size()) * slot));
  parallel::parallel_region(call.threads, [&](parallel::Team& team) {
    team.for_each_dynamic(static_cast<index_t>(items.size()), [&](index_t k) {
      const DecodeItem& item = items[static_cast<std::size_t>(k)];
      const index_t length = call.lengths[static_cast<std::size_t>(item.b)];
      const KeyRange chunk{item.chunk * kDecodeChunkKeys, std::min(length, (item.chunk + 1) * kDecodeChunkKeys)};
      float* own = partials + k * slot;
      decode_chunk(call, spans, item.b, item.kv_head, chunk, own, own + rows * value_dim);
    });
    team.for_each_static(call.batch * call.kv_heads, [&](index_t group_index) {
      const index_t b = group_index / call.kv_heads, g = group_index % call.kv_heads;
      float* merged = attnkit::detail::thread_scratch<struct DecodeMergeTag, float>(value_dim);
      for (index_t r = 0; r < rows; ++r) {
        float lse = -std::numeric_limits<float>::infinity();
        for (index_t k = first_item[static_cast<std::size_t>(group_index)];
             k < first_item[static_cast<std::size_t>(group_index) + 1]; ++k) {
          const float* own = partials + k * slot;
          lse = merge_partial(merged, lse, own + r * value_dim, own[rows * value_dim + r], value_dim);
        }
        if (lse == -std::numeric_limits<float>::infinity()) std::fill(merged, merged + value_dim, 0.0f);
        const index_t h = g * call.group() + r / call.q_len, i = r % call.q_len;
        simd::narrow_row(merged, value_dim, call.out.row(b, h, i));
        if (call.lse != nullptr) *call.lse->row(b, h, i) = lse;
      }
    });
  });
}

}  // namespace attnkit::kernel
