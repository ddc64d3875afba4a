#pragma once
// KV caches for decoding (docs/SPEC.md section 13): a contiguous cache (one slot range per
// sequence) and a paged cache (fixed-size pages and a block table), each with one current
// length per sequence, in float, bfloat16, float16 or 8-bit blocks (q8_0_block).

#include <concepts>
#include <cstdint>
#include <span>
#include <type_traits>

#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/q8_block.hpp"
#include "attnkit/core/tensor_view.hpp"

namespace attnkit {

/// An element type a KV cache stores.
template <class E>
concept CacheElement =
    std::same_as<E, float> || std::same_as<E, bfloat16> || std::same_as<E, float16> || std::same_as<E, q8_0_block>;

/// A cache's element type as a view holds it: a CacheElement, or a const one for a cache that
/// is only read (KvCache<const float> over const buffers; attnkit::append takes writable ones).
template <class E>
concept CacheStorage = CacheElement<std::remove_const_t<E>>;

namespace detail {
/// The lengths a cache of E holds: const for a read-only cache.
template <class E>
using cache_length_t = std::conditional_t<std::is_const_v<E>, const index_t, index_t>;
}  // namespace detail

/// Values per stored element: 32 for an 8-bit block, else 1. A cache view's dim axis counts
/// elements, so a q8_0_block cache of head dimension D has D / 32 of them per row.
template <CacheElement E>
inline constexpr index_t kValuesPerElement = std::same_as<E, q8_0_block> ? q8_0_block::kValues : 1;

/// A contiguous cache: k [B, Hk, capacity, D], v [B, Hk, capacity, Dv] (dims in elements, see
/// kValuesPerElement), any strides with a unit last one (so a [B, capacity, Hk, D] buffer is
/// viewed with attnkit::blhd), and lengths[b] in [0, capacity]: sequence b holds its tokens
/// 0 .. lengths[b] - 1 in slots 0 .. lengths[b] - 1. attnkit::append writes rows and advances
/// the lengths; attnkit::attention reads them. A KvCache<const E> (const buffers and lengths)
/// is read by attnkit::attention and reference::attention like a KvCache<E>.
template <CacheStorage E>
struct KvCache {
  TensorView<E> k;
  TensorView<E> v;
  std::span<detail::cache_length_t<E>> lengths;
};

/// A sequence-major table of page ids (vLLM's block table): entry (b, p) = data[b * stride + p]
/// is the page holding tokens [p page_size, (p + 1) page_size) of sequence b. Only the entries
/// of a sequence's first ceil(lengths[b] / page_size) pages are read; the others may hold
/// anything (-1 for unmapped is customary). Two sequences may list the same page (a shared
/// prompt prefix).
struct PageTable {
  const std::int32_t* data = nullptr;
  index_t sequences = 0;
  index_t pages_per_sequence = 0;
  index_t stride = 0;  // entries between the rows of two sequences (>= pages_per_sequence)

  std::int32_t operator()(index_t b, index_t p) const { return data[b * stride + p]; }
};

/// A paged cache: k_pages [num_pages, Hk, page_size, D], v_pages [num_pages, Hk, page_size, Dv]
/// (strided, so vLLM's [num_pages, page_size, Hk, D] is viewed with attnkit::blhd), the block
/// table and lengths[b] <= pages_per_sequence * page_size (its capacity). Token t of sequence b
/// sits in slot t % page_size of page block_table(b, t / page_size). PagedKvCache<const E> is
/// its read-only form, as for KvCache.
template <CacheStorage E>
struct PagedKvCache {
  TensorView<E> k_pages;
  TensorView<E> v_pages;
  PageTable block_table;
  std::span<detail::cache_length_t<E>> lengths;
};

namespace detail {
template <class C>
struct cache_traits {
  static constexpr bool kIsCache = false;
};
template <CacheStorage E>
struct cache_traits<KvCache<E>> {
  static constexpr bool kIsCache = true;
  static constexpr bool kPaged = false;
  using element_type = std::remove_const_t<E>;
};
template <CacheStorage E>
struct cache_traits<PagedKvCache<E>> {
  static constexpr bool kIsCache = true;
  static constexpr bool kPaged = true;
  using element_type = std::remove_const_t<E>;
};

/// The cache as the readers take it: itself, or for a read-only cache the same views and
/// lengths typed as a writable one (the readers never write through it; append, which writes,
/// takes writable caches only).
template <CacheElement E>
const KvCache<E>& readable_cache(const KvCache<E>& cache) {
  return cache;
}
template <CacheElement E>
const PagedKvCache<E>& readable_cache(const PagedKvCache<E>& cache) {
  return cache;
}
template <CacheElement E>
KvCache<E> readable_cache(const KvCache<const E>& cache) {
  const auto writable = [](const TensorView<const E>& view) {
    return TensorView<E>(const_cast<E*>(view.data()), view.sizes(), view.strides());
  };
  return {writable(cache.k), writable(cache.v),
          std::span<index_t>(const_cast<index_t*>(cache.lengths.data()), cache.lengths.size())};
}
template <CacheElement E>
PagedKvCache<E> readable_cache(const PagedKvCache<const E>& cache) {
  const auto writable = [](const TensorView<const E>& view) {
    return TensorView<E>(const_cast<E*>(view.data()), view.sizes(), view.strides());
  };
  return {writable(cache.k_pages), writable(cache.v_pages), cache.block_table,
          std::span<index_t>(const_cast<index_t*>(cache.lengths.data()), cache.lengths.size())};
}
}  // namespace detail

/// KvCache<E> or PagedKvCache<E>.
template <class C>
concept AnyKvCache = detail::cache_traits<C>::kIsCache;

/// The element type a cache stores.
template <AnyKvCache C>
using cache_element_t = typename detail::cache_traits<C>::element_type;

}  // namespace attnkit
