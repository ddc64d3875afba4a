#pragma once
// attnkit::append: new K/V rows written into a KV cache at each sequence's length, which then
// advances (flash-attn's flash_attn_with_kvcache and llama.cpp's cache update do the same).

#include <algorithm>
#include <concepts>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "attnkit/cache/cache_rows.hpp"
#include "attnkit/cache/kv_cache.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/core/q8_block.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"
#include "attnkit/simd/convert.hpp"

namespace attnkit {

namespace detail {

/// dst = the n values of src in the cache's element type E: copied when the types agree, else
/// widened to float and rounded to nearest even (half caches) or quantized block by block
/// (q8_0_block; `buffer` holds n floats).
template <CacheElement E, class S>
void store_cache_row(const S* src, index_t n, E* dst, float* buffer) {
  if constexpr (std::is_same_v<S, E>) {
    std::copy(src, src + n, dst);
  } else if constexpr (std::is_same_v<E, float>) {
    simd::widen_row(src, n, dst);
  } else {
    simd::widen_row(src, n, buffer);
    if constexpr (std::is_same_v<E, q8_0_block>) {
      for (index_t block = 0; block < n / q8_0_block::kValues; ++block)
        dst[block] = quantize_q8_0(buffer + block * q8_0_block::kValues);
    } else {
      simd::narrow_row(buffer, n, dst);
    }
  }
}

}  // namespace detail

namespace detail {

/// The element types rows to append may have for a cache of E: float or half (converted to
/// E), or E's own 8-bit blocks for an 8-bit cache (copied).
template <class S, class E>
concept AppendableTo = std::same_as<S, float> || HalfType<S> ||(std::same_as<S, q8_0_block>&& std::same_as<E, S>);

/// The shared body of both appends: checks everything, then writes rows 0 .. rows.of(b) - 1 of
/// sequence b at its length and advances the lengths.
template <AnyKvCache Cache, class S>
void append_rows(const Cache& cache, const TensorView<const S>& k_new, const TensorView<const S>& v_new,
                 const AppendedRows& rows) {
  using E = cache_element_t<Cache>;
  static_assert(AppendableTo<S, E>,
                "attnkit::append: rows are float, bfloat16 or float16 (converted to the cache's type), or "
                "q8_0_block rows for a q8_0_block cache (copied)");
  validate_view("k_new", k_new, 1);
  validate_view("v_new", v_new, 1);
  const index_t n = k_new.seq();
  if (!rows.counts.empty()) {
    if (rows.counts.size() != cache.lengths.size()) {
      reject("counts.size()", rows.counts.size(),
             "must equal the cache's batch (lengths.size() = " + std::to_string(cache.lengths.size()) + ")");
    }
    for (std::size_t b = 0; b < rows.counts.size(); ++b) {
      if (rows.counts[b] < 0 || rows.counts[b] > n) {
        reject("counts[" + std::to_string(b) + "]", rows.counts[b],
               "must lie in [0, k_new.sizes[seq] = " + std::to_string(n) + "]");
      }
    }
  }
  const CacheShape shape = validate_cache(cache, rows);
  const index_t per_element = kValuesPerElement<S>;
  require_size("k_new", k_new, kBatch, shape.batch, "must equal the cache's batch (lengths.size())");
  require_size("k_new", k_new, kHeads, shape.kv_heads, "must equal the cache's kv heads");
  require_size("k_new", k_new, kDim, shape.head_dim / per_element,
               "must equal the cache's head dimension (in elements of k_new: 8-bit blocks hold 32 values)");
  require_size("v_new", v_new, kBatch, shape.batch, "must equal k_new.sizes[batch]");
  require_size("v_new", v_new, kHeads, shape.kv_heads, "must equal k_new.sizes[heads]");
  require_size("v_new", v_new, kSeq, n, "must equal k_new.sizes[seq] (one value row per key row)");
  require_size("v_new", v_new, kDim, shape.value_dim / per_element,
               "must equal the cache's value dimension (in elements of v_new)");

  const CacheRows<E> cache_rows = detail::cache_rows<E>(cache);
  std::vector<float> buffer(
      static_cast<std::size_t>(std::is_same_v<S, E> ? 0 : std::max(shape.head_dim, shape.value_dim)));
  for (index_t b = 0; b < shape.batch; ++b) {
    const index_t first = cache.lengths[static_cast<std::size_t>(b)];
    for (index_t h = 0; h < shape.kv_heads; ++h)
      for (index_t t = 0; t < rows.of(static_cast<std::size_t>(b)); ++t) {
        store_cache_row(k_new.row(b, h, t), shape.head_dim / per_element, cache_rows.key(b, h, first + t),
                        buffer.data());
        store_cache_row(v_new.row(b, h, t), shape.value_dim / per_element, cache_rows.value(b, h, first + t),
                        buffer.data());
      }
  }
  for (std::size_t b = 0; b < cache.lengths.size(); ++b) cache.lengths[b] += rows.of(b);
}

}  // namespace detail

/// Writes k_new [B, Hk, n, D] and v_new [B, Hk, n, Dv] into the cache at tokens
/// lengths[b] .. lengths[b] + n - 1 of every sequence b, then adds n to every length.
/// k_new and v_new are float, bfloat16 or float16 (both the same), or q8_0_block rows for a
/// q8_0_block cache (their dim axis counts blocks); rows are stored in the cache's type:
/// copied, rounded to nearest even, or quantized to 8-bit blocks (SPEC.md section 13). Throws
/// attnkit::invalid_argument, with nothing written and no length changed, when a shape does
/// not match the cache, a sequence has no room for n more tokens, or (paged) a page those
/// tokens need is not a valid page id. Allocates nothing but one row of floats for a
/// converting store. k_new and v_new must not overlap the cache.
template <AnyKvCache Cache, class S>
void append(const Cache& cache, TensorView<const S> k_new, TensorView<const S> v_new) {
  detail::append_rows(cache, k_new, v_new, detail::AppendedRows(k_new.seq()));
}

/// Ragged append (continuous batching): sequence b takes counts[b] rows, rows
/// 0 .. counts[b] - 1 of k_new[b] and v_new[b] ([B, Hk, n, D] and [B, Hk, n, Dv], each count
/// in [0, n]; rows past a sequence's count are not read), written at its length, which
/// advances by its count. The rules and the all-or-nothing guarantee of append above.
template <AnyKvCache Cache, class S>
void append(const Cache& cache, TensorView<const S> k_new, TensorView<const S> v_new, std::span<const index_t> counts) {
  detail::append_rows(cache, k_new, v_new, detail::AppendedRows(counts));
}

/// append for views of non-const elements.
template <AnyKvCache Cache, class S>
void append(const Cache& cache, TensorView<S> k_new, TensorView<S> v_new) {
  append(cache, TensorView<const S>(k_new), TensorView<const S>(v_new));
}
template <AnyKvCache Cache, class S>
void append(const Cache& cache, TensorView<S> k_new, TensorView<S> v_new, std::span<const index_t> counts) {
  append(cache, TensorView<const S>(k_new), TensorView<const S>(v_new), counts);
}

}  // namespace attnkit
