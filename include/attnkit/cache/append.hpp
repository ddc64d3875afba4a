#pragma once
// attnkit::append: new K/V rows written into a KV cache at each sequence's length, which then
// advances (flash-attn's flash_attn_with_kvcache and llama.cpp's cache update do the same).

#include <algorithm>
#include <concepts>
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

/// Writes k_new [B, Hk, n, D] and v_new [B, Hk, n, Dv] into the cache at tokens
/// lengths[b] .. lengths[b] + n - 1 of every sequence b, then adds n to every length.
/// k_new and v_new are float, bfloat16 or float16 (both the same); rows are stored in the
/// cache's type: copied, rounded to nearest even, or quantized to 8-bit blocks (SPEC.md
/// section 13). Throws attnkit::invalid_argument, with nothing written and no length changed,
/// when a shape does not match the cache, a sequence has no room for n more tokens, or
/// (paged) a page those tokens need is not a valid page id. Allocates nothing but one row of
/// floats for a converting store. k_new and v_new must not overlap the cache.
template <AnyKvCache Cache, class S>
requires(std::same_as<S, float> || HalfType<S>) void append(const Cache& cache, TensorView<const S> k_new,
                                                            TensorView<const S> v_new) {
  using E = cache_element_t<Cache>;
  detail::validate_view("k_new", k_new, 1);
  detail::validate_view("v_new", v_new, 1);
  const index_t rows = k_new.seq();
  const detail::CacheShape shape = detail::validate_cache(cache, rows);
  detail::require_size("k_new", k_new, kBatch, shape.batch, "must equal the cache's batch (lengths.size())");
  detail::require_size("k_new", k_new, kHeads, shape.kv_heads, "must equal the cache's kv heads");
  detail::require_size("k_new", k_new, kDim, shape.head_dim,
                       "must equal the cache's head dimension (dim elements times values per element)");
  detail::require_size("v_new", v_new, kBatch, shape.batch, "must equal k_new.sizes[batch]");
  detail::require_size("v_new", v_new, kHeads, shape.kv_heads, "must equal k_new.sizes[heads]");
  detail::require_size("v_new", v_new, kSeq, rows, "must equal k_new.sizes[seq] (one value row per key row)");
  detail::require_size("v_new", v_new, kDim, shape.value_dim, "must equal the cache's value dimension");

  const detail::CacheRows<E> cache_rows = detail::cache_rows<E>(cache);
  std::vector<float> buffer(
      static_cast<std::size_t>(std::is_same_v<S, E> ? 0 : std::max(shape.head_dim, shape.value_dim)));
  for (index_t b = 0; b < shape.batch; ++b) {
    const index_t first = cache.lengths[static_cast<std::size_t>(b)];
    for (index_t h = 0; h < shape.kv_heads; ++h)
      for (index_t t = 0; t < rows; ++t) {
        detail::store_cache_row(k_new.row(b, h, t), shape.head_dim, cache_rows.key(b, h, first + t), buffer.data());
        detail::store_cache_row(v_new.row(b, h, t), shape.value_dim, cache_rows.value(b, h, first + t), buffer.data());
      }
  }
  for (index_t& length : cache.lengths) length += rows;
}

/// append for views of non-const elements.
template <AnyKvCache Cache, class S>
requires(std::same_as<S, float> || HalfType<S>) void append(const Cache& cache, TensorView<S> k_new,
                                                            TensorView<S> v_new) {
  append(cache, TensorView<const S>(k_new), TensorView<const S>(v_new));
}

}  // namespace attnkit
