#pragma once
// A validated call over a KV cache with its element types behind virtual functions
// (CacheCall), so that what depends on the pattern (the rows' attended keys, the prefill
// schedule's plans and tiled driver) is compiled once per pattern, and what depends on the
// element types (widening the cache's and the query's rows, narrowing the results, the decode
// driver) once per (q, cache, out) type, not once per pattern times every type combination.
// In the dispatch library that was 40% of each target's code (run_decode and run_cache_prefill
// per pattern x 20 type combinations; docs/notes/test-workflow-time.md).

#include <algorithm>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "attnkit/cache/cache_rows.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/q8_block.hpp"
#include "attnkit/core/score_modifiers.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/kernel/decode_call.hpp"
#include "attnkit/kernel/decode_driver.hpp"
#include "attnkit/parallel/team.hpp"
#include "attnkit/simd/convert.hpp"
#include "attnkit/simd/widening_load.hpp"

namespace attnkit::kernel {

/// A validated call over a cache: its geometry, scale (sigma), score modifiers, 8-bit query
/// mode and lse (float [.., Hq, .., 1] laid out as the geometry says, or null), and the
/// element-typed steps the two schedules take (CacheCallOf implements them). Holds the query
/// offsets its geometry points into, so it is neither copied nor moved.
class CacheCall {
 public:
  CacheCall(std::span<const index_t> lengths, std::vector<index_t> query_offsets, bool packed,
            const attnkit::detail::CacheShape& shape, index_t q_heads, const TensorView<float>* lse, float scale,
            const ScoreModifiers& modifiers, bool quantized_query)
      : query_offsets_(std::move(query_offsets)),
        geometry_{lengths, query_offsets_, packed,         shape.batch,
                  q_heads, shape.kv_heads, shape.head_dim, shape.value_dim},
        lse_(lse),
        scale_(scale),
        modifiers_(modifiers),
        quantized_query_(quantized_query) {}
  CacheCall(const CacheCall&) = delete;
  CacheCall& operator=(const CacheCall&) = delete;
  virtual ~CacheCall() = default;

  const DecodeGeometry& geometry() const { return geometry_; }
  const TensorView<float>* lse() const { return lse_; }
  float scale() const { return scale_; }
  const ScoreModifiers& modifiers() const { return modifiers_; }
  bool quantized_query() const { return quantized_query_; }

  /// Prefill schedule: the first `count` rows of sequence b (before its first token) get
  /// zeros in out and -inf in lse.
  virtual void write_empty_rows(index_t b, index_t count) const = 0;
  /// Prefill schedule: sequence b's K and V rows of every kv head widened to float (keys
  /// [Hk, length, D], values [Hk, length, Dv], gathered page by page, 8-bit blocks
  /// dequantized) and its query rows first_row .. first_row + rows of every head (queries
  /// [Hq, rows, D]; in the 8-bit query mode quantized and read back, quantize_and_restore).
  virtual void widen_sequence(index_t b, index_t first_row, index_t rows, float* keys, float* values, float* queries,
                              int threads) const = 0;
  /// Prefill schedule: results [Hq, rows, Dv] into out's rows first_row .. of sequence b.
  virtual void store_rows(index_t b, index_t first_row, index_t rows, const float* results) const = 0;
  /// Decode schedule: every sequence on it (kernel::run_decode), rows' keys from `spans`.
  virtual void run_decode_schedule(const DecodeSpans& spans, int threads) const = 0;

 private:
  std::vector<index_t> query_offsets_;
  DecodeGeometry geometry_;
  const TensorView<float>* lse_;
  float scale_;
  ScoreModifiers modifiers_;
  bool quantized_query_;
};

/// A query row as the 8-bit query mode reads it on the prefill schedule (SPEC.md section 13):
/// each block of 32 float values quantized by the cache's rule and read back as d * q_i (exact
/// in float), so float scores of these rows are the mode's formula up to float rounding.
inline void quantize_and_restore(float* row, index_t head_dim) {
  for (index_t c = 0; c < head_dim; c += q8_0_block::kValues) dequantize_q8_0(quantize_q8_0(row + c), row + c);
}

/// The steps of CacheCall for q of Q, a cache of E and out of Out.
template <class Q, class E, class Out>
class CacheCallOf final : public CacheCall {
 public:
  CacheCallOf(const TensorView<const Q>& q, const attnkit::detail::CacheRows<const E>& cache,
              const TensorView<Out>& out, std::span<const index_t> lengths, std::vector<index_t> query_offsets,
              bool packed, const attnkit::detail::CacheShape& shape, const TensorView<float>* lse, float scale,
              const ScoreModifiers& modifiers, bool quantized_query)
      : CacheCall(lengths, std::move(query_offsets), packed, shape, q.heads(), lse, scale, modifiers, quantized_query),
        q_(q),
        cache_(cache),
        out_(out) {}

  void write_empty_rows(index_t b, index_t count) const override {
    const DecodeGeometry& g = geometry();
    for (index_t h = 0; h < g.q_heads; ++h)
      for (index_t i = 0; i < count; ++i) {
        Out* row = out_.row(g.view_batch(b), h, g.view_row(b, i));
        std::fill(row, row + g.value_dim, Out{});
        if (lse() != nullptr)
          *lse()->row(g.view_batch(b), h, g.view_row(b, i)) = -std::numeric_limits<float>::infinity();
      }
  }

  void widen_sequence(index_t b, index_t first_row, index_t rows, float* keys, float* values, float* queries,
                      int threads) const override {
    const DecodeGeometry& g = geometry();
    const index_t length = g.lengths[static_cast<std::size_t>(b)];
    parallel::parallel_region(threads, [&](parallel::Team& team) {
      team.for_each_static(g.kv_heads * length, [&](index_t id) {
        const index_t h = id / length, t = id % length;
        simd::widen_values(cache_.key(b, h, t), g.head_dim, keys + id * g.head_dim);
        simd::widen_values(cache_.value(b, h, t), g.value_dim, values + id * g.value_dim);
      });
      team.for_each_static(g.q_heads * rows, [&](index_t id) {
        float* row = queries + id * g.head_dim;
        simd::widen_row(q_.row(g.view_batch(b), id / rows, g.view_row(b, first_row + id % rows)), g.head_dim, row);
        if (quantized_query()) quantize_and_restore(row, g.head_dim);
      });
    });
  }

  void store_rows(index_t b, index_t first_row, index_t rows, const float* results) const override {
    const DecodeGeometry& g = geometry();
    for (index_t h = 0; h < g.q_heads; ++h)
      for (index_t i = 0; i < rows; ++i)
        simd::narrow_row(results + (h * rows + i) * g.value_dim, g.value_dim,
                         out_.row(g.view_batch(b), h, g.view_row(b, first_row + i)));
  }

  void run_decode_schedule(const DecodeSpans& spans, int threads) const override {
    run_decode(geometry(), cache_, q_, out_, lse(), scale(), modifiers(), quantized_query(), threads, spans);
  }

 private:
  TensorView<const Q> q_;
  attnkit::detail::CacheRows<const E> cache_;
  TensorView<Out> out_;
};

}  // namespace attnkit::kernel
