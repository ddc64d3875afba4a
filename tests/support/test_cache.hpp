#pragma once
// KV caches for tests (SPEC.md section 13): a cache of any element type over storage it owns,
// seen contiguous or paged, filled through attnkit::append; N(0, 1) queries; the decode
// tolerance.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "attnkit/cache/append.hpp"
#include "attnkit/cache/kv_cache.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/core/q8_block.hpp"
#include "attnkit/core/shape.hpp"
#include "support/accuracy.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// A cache of element type E over storage it owns, seen contiguous ([B, Hk, capacity, D]) or
/// paged ([pages, Hk, page_size, D] with a shuffled block table, optionally sequence 1 sharing
/// sequence 0's first page). Rows are written through attnkit::append from N(0, 1) floats.
template <class E>
struct TestCache {
  index_t batch, kv_heads, capacity, head_dim, value_dim, page_size;
  bool paged;
  std::vector<E> k, v;
  std::vector<std::int32_t> table;
  std::vector<index_t> lengths;

  TestCache(index_t b, index_t hk, index_t cap, index_t d, index_t dv, bool is_paged, index_t page = 16,
            bool share_first_page = false)
      : batch(b),
        kv_heads(hk),
        capacity(cap),
        head_dim(d),
        value_dim(dv),
        page_size(page),
        paged(is_paged),
        lengths(static_cast<std::size_t>(b), 0) {
    const index_t pages_per_sequence = capacity / page_size;
    const index_t slots = paged ? (batch * pages_per_sequence + 3) * page_size : batch * capacity;
    k.resize(static_cast<std::size_t>(slots * kv_heads * head_dim / kValuesPerElement<E>));
    v.resize(static_cast<std::size_t>(slots * kv_heads * value_dim / kValuesPerElement<E>));
    if (paged) {
      // Page ids of sequence b, page p: a fixed shuffle of [0, pages) (3 spare pages unused).
      const index_t pages = batch * pages_per_sequence + 3;
      std::vector<std::int32_t> order(static_cast<std::size_t>(pages));
      for (index_t i = 0; i < pages; ++i)
        order[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7 + 3) % pages);
      table.assign(order.begin(), order.begin() + batch * pages_per_sequence);
      if (share_first_page && batch > 1) table[static_cast<std::size_t>(pages_per_sequence)] = table[0];
    }
  }

  KvCache<E> contiguous() {
    return KvCache<E>{bhld(k.data(), batch, kv_heads, capacity, head_dim / kValuesPerElement<E>),
                      bhld(v.data(), batch, kv_heads, capacity, value_dim / kValuesPerElement<E>), lengths};
  }
  /// The same storage seen as [B, capacity, Hk, D] (heads interleaved token by token, as
  /// llama.cpp and vLLM store a sequence): decode reads it page by page, all heads together.
  KvCache<E> heads_interleaved() {
    const auto view = [&](std::vector<E>& storage, index_t dim) {
      const index_t row = dim / kValuesPerElement<E>;
      return TensorView<E>(storage.data(), {batch, kv_heads, capacity, row},
                           {capacity * kv_heads * row, row, kv_heads * row, 1});
    };
    return KvCache<E>{view(k, head_dim), view(v, value_dim), lengths};
  }
  PagedKvCache<E> paged_view() {
    const index_t pages = static_cast<index_t>(k.size()) / (kv_heads * page_size * head_dim / kValuesPerElement<E>);
    const index_t per = capacity / page_size;
    return PagedKvCache<E>{bhld(k.data(), pages, kv_heads, page_size, head_dim / kValuesPerElement<E>),
                           bhld(v.data(), pages, kv_heads, page_size, value_dim / kValuesPerElement<E>),
                           PageTable{table.data(), batch, per, per}, lengths};
  }

  /// Appends `rows` N(0, 1) rows (seed) to every sequence, then sets the lengths.
  void fill(index_t rows, std::uint64_t seed, const std::vector<index_t>& final_lengths) {
    std::vector<float> kn(static_cast<std::size_t>(batch * kv_heads * rows * head_dim));
    std::vector<float> vn(static_cast<std::size_t>(batch * kv_heads * rows * value_dim));
    for (std::size_t i = 0; i < kn.size(); ++i) kn[i] = static_cast<float>(normal_sample(seed, 1, i));
    for (std::size_t i = 0; i < vn.size(); ++i) vn[i] = static_cast<float>(normal_sample(seed, 2, i));
    std::fill(lengths.begin(), lengths.end(), 0);
    const auto k_new = bhld(static_cast<const float*>(kn.data()), batch, kv_heads, rows, head_dim);
    const auto v_new = bhld(static_cast<const float*>(vn.data()), batch, kv_heads, rows, value_dim);
    if (paged) {
      append(paged_view(), k_new, v_new);
    } else {
      append(contiguous(), k_new, v_new);
    }
    lengths = final_lengths;
  }

  /// Every slot of sequence b from token `from` on (contiguous caches) set to NaN: never read.
  void poison_after(index_t b, index_t from) {
    for (index_t h = 0; h < kv_heads; ++h)
      for (index_t t = from; t < capacity; ++t) {
        E* key = contiguous().k.row(b, h, t);
        E* value = contiguous().v.row(b, h, t);
        poison(key, head_dim / kValuesPerElement<E>);
        poison(value, value_dim / kValuesPerElement<E>);
      }
  }
  static void poison(E* row, index_t elements) {
    for (index_t e = 0; e < elements; ++e) {
      if constexpr (std::is_same_v<E, q8_0_block>) {
        row[e].scale = to_float16(std::numeric_limits<float>::quiet_NaN());
      } else {
        row[e] = store_as<E>(kNaN);
      }
    }
  }
};

/// q [B, Hq, Lq, D] N(0, 1) in element type Q.
template <class Q>
std::vector<Q> make_queries(index_t count, std::uint64_t seed) {
  std::vector<Q> q(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = store_as<Q>(normal_sample(seed, 3, i));
  return q;
}

/// SPEC.md section 11's float tolerance (atol 2e-5 max|V| with max|V| about 5 for N(0, 1)
/// values, rtol 1e-4) plus the rounding of the output type.
template <class Out>
Tolerance decode_tolerance() {
  return Tolerance{2e-5 * 5.0, 1e-4 + output_rounding<Out>()};
}

}  // namespace attnkit::testing
