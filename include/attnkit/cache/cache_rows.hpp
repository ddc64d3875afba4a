#pragma once
// Validation of a KV cache and access to its rows: what attention over a cache and append
// share. A contiguous cache is read as a paged one with one page per sequence.

#include <algorithm>
#include <cstdint>
#include <string>

#include "attnkit/cache/kv_cache.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"

namespace attnkit::detail {

/// Sizes of a validated cache, head dims in values (not elements).
struct CacheShape {
  index_t batch = 0;
  index_t kv_heads = 0;
  index_t capacity = 0;  // tokens a sequence can hold
  index_t head_dim = 0;
  index_t value_dim = 0;
  index_t page_size = 0;  // tokens per page (capacity for a contiguous cache)
};

/// The K and V rows of a cache's tokens. E is the element type, const for reading.
/// Rows of tokens [t, page_end(t)) of one (sequence, kv head) lie key_stride() (value_stride())
/// elements apart; a contiguous cache is one page per sequence.
template <class E>
class CacheRows {
 public:
  CacheRows(TensorView<E> k, TensorView<E> v, const std::int32_t* table, index_t table_stride, index_t page_size)
      : k_(k), v_(v), table_(table), table_stride_(table_stride), page_size_(std::max<index_t>(page_size, 1)) {}

  E* key(index_t b, index_t h, index_t t) const { return k_.row(page(b, t), h, t % page_size_); }
  E* value(index_t b, index_t h, index_t t) const { return v_.row(page(b, t), h, t % page_size_); }
  index_t key_stride() const { return k_.stride(kSeq); }
  index_t value_stride() const { return v_.stride(kSeq); }
  /// Tokens per page (a contiguous cache's capacity).
  index_t page_size() const { return page_size_; }
  /// One past the last token in the page of token t.
  index_t page_end(index_t t) const { return (t / page_size_ + 1) * page_size_; }
  /// Whether the kv heads' rows of one page lie together (a paged cache, or heads interleaved
  /// token by token as in [B, capacity, Hk, D]): reading a page's rows head after head is then
  /// one pass over memory, where one head's rows of page after page jump between short runs
  /// (on an AMD EPYC family 26, a read probe in that order ran at 0.58-0.67 of a linear one;
  /// docs/notes/decode-streaming.md).
  bool heads_share_pages() const {
    const auto interleaved = [](const TensorView<E>& view) { return view.stride(kHeads) < view.stride(kSeq); };
    return table_ != nullptr || (interleaved(k_) && interleaved(v_));
  }

 private:
  index_t page(index_t b, index_t t) const {
    return table_ == nullptr ? b : static_cast<index_t>(table_[b * table_stride_ + t / page_size_]);
  }
  TensorView<E> k_, v_;
  const std::int32_t* table_;
  index_t table_stride_;
  index_t page_size_;
};

/// Checks the K and V views of a cache (`k_name`, `v_name`: how messages name them): unit last
/// strides, equal batch (or page), head and token extents, dims of whole elements.
template <CacheElement E>
CacheShape validate_cache_views(const char* k_name, const TensorView<E>& k, const char* v_name,
                                const TensorView<E>& v) {
  validate_view(k_name, k, 1);
  validate_view(v_name, v, 1);
  require_size(v_name, v, kBatch, k.batch(), (std::string("must equal ") + k_name + ".sizes[batch]").c_str());
  require_size(v_name, v, kHeads, k.heads(), (std::string("must equal ") + k_name + ".sizes[heads]").c_str());
  require_size(v_name, v, kSeq, k.seq(), (std::string("must equal ") + k_name + ".sizes[seq]").c_str());
  return CacheShape{k.batch(), k.heads(), k.seq(), k.dim() * kValuesPerElement<E>, v.dim() * kValuesPerElement<E>,
                    k.seq()};
}

/// Rows about to be appended to each sequence: the same count for all, or one per sequence
/// (a ragged append; its size is checked by the caller).
struct AppendedRows {
  index_t uniform = 0;
  std::span<const index_t> counts = {};

  AppendedRows(index_t rows = 0) : uniform(rows) {}  // NOLINT(google-explicit-constructor): a count
  explicit AppendedRows(std::span<const index_t> per_sequence) : counts(per_sequence) {}
  index_t of(std::size_t b) const { return counts.empty() ? uniform : counts[b]; }
};

/// Checks lengths[b] in [0, capacity] (the `extra` rows about to be appended count too).
inline void validate_lengths(std::span<const index_t> lengths, index_t capacity, const AppendedRows& extra) {
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    const index_t rows = extra.of(b);
    if (lengths[b] < 0 || lengths[b] > capacity - rows) {
      const std::string rule = rows == 0 ? "must lie in [0, capacity = " + std::to_string(capacity) + "]"
                                         : "plus the " + std::to_string(rows) +
                                               " appended rows must not exceed the capacity " +
                                               std::to_string(capacity) + " (the cache is full)";
      reject("cache.lengths[" + std::to_string(b) + "]", lengths[b], rule);
    }
  }
}

/// A contiguous cache: views, lengths (plus `extra` rows about to be appended).
template <CacheElement E>
CacheShape validate_cache(const KvCache<E>& cache, const AppendedRows& extra = {}) {
  CacheShape shape = validate_cache_views("cache.k", cache.k, "cache.v", cache.v);
  if (static_cast<index_t>(cache.lengths.size()) != shape.batch) {
    reject("cache.lengths.size()", cache.lengths.size(),
           "must equal cache.k.sizes[batch] = " + std::to_string(shape.batch) + " (one length per sequence)");
  }
  validate_lengths(cache.lengths, shape.capacity, extra);
  return shape;
}

/// A paged cache: views, block table, lengths (plus `extra` rows about to be appended) and the
/// table entries of every page those tokens occupy.
template <CacheElement E>
CacheShape validate_cache(const PagedKvCache<E>& cache, const AppendedRows& extra = {}) {
  const CacheShape pages = validate_cache_views("cache.k_pages", cache.k_pages, "cache.v_pages", cache.v_pages);
  const PageTable& table = cache.block_table;
  const index_t batch = static_cast<index_t>(cache.lengths.size());
  if (table.sequences != batch) {
    reject("cache.block_table.sequences", table.sequences,
           "must equal cache.lengths.size() = " + std::to_string(batch) + " (one row per sequence)");
  }
  if (table.pages_per_sequence < 0) {
    reject("cache.block_table.pages_per_sequence", table.pages_per_sequence, "must be >= 0");
  }
  if (table.stride < table.pages_per_sequence) {
    reject("cache.block_table.stride", table.stride,
           "must be >= pages_per_sequence = " + std::to_string(table.pages_per_sequence));
  }
  const index_t page_size = pages.capacity;
  const CacheShape shape{batch,          pages.kv_heads,  table.pages_per_sequence * page_size,
                         pages.head_dim, pages.value_dim, page_size};
  if (page_size == 0 && table.pages_per_sequence > 0) {
    reject("cache.k_pages.sizes[seq]", page_size, "the page size must be >= 1");
  }
  validate_lengths(cache.lengths, shape.capacity, extra);
  for (index_t b = 0; b < batch; ++b) {
    const index_t used =
        page_size == 0
            ? 0
            : ceil_div(cache.lengths[static_cast<std::size_t>(b)] + extra.of(static_cast<std::size_t>(b)), page_size);
    if (used > 0 && table.data == nullptr) {
      reject("cache.block_table.data", "nullptr", "must not be null while a sequence holds tokens");
    }
    for (index_t p = 0; p < used; ++p) {
      const std::int32_t id = table(b, p);
      if (id < 0 || id >= pages.batch) {
        reject("cache.block_table(" + std::to_string(b) + ", " + std::to_string(p) + ")", id,
               "must be a page in [0, num_pages = " + std::to_string(pages.batch) + ") (page " + std::to_string(p) +
                   " of sequence " + std::to_string(b) + " is in use)");
      }
    }
  }
  return shape;
}

/// The rows of a validated cache (E const for reading).
template <class E, CacheElement S>
CacheRows<E> cache_rows(const KvCache<S>& cache) {
  return CacheRows<E>(TensorView<E>(cache.k), TensorView<E>(cache.v), nullptr, 0, cache.k.seq());
}
template <class E, CacheElement S>
CacheRows<E> cache_rows(const PagedKvCache<S>& cache) {
  return CacheRows<E>(TensorView<E>(cache.k_pages), TensorView<E>(cache.v_pages), cache.block_table.data,
                      cache.block_table.stride, cache.k_pages.seq());
}

}  // namespace attnkit::detail
