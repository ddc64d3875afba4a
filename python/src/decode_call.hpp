#pragma once
// KV caches in Python (attnkit.KvCache, attnkit.PagedKvCache): the Python objects a cache is
// made of, their C++ views, and one decode call's arguments (decode.cpp; the combinations'
// kernels in decode_kernels.cpp).

#include <optional>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <pybind11/pybind11.h>

#include "attnkit/cache/kv_cache.hpp"
#include "attnkit/core/options.hpp"
#include "patterns.hpp"
#include "tensor_arg.hpp"

namespace attnkit::python {

/// attnkit.KvCache: k [B, Hk, capacity, D] and v [B, Hk, capacity, Dv] (float32, bfloat16 or
/// float16; or uint8 [B, Hk, capacity, D / 32, 34] for 8-bit blocks) and lengths int64 [B].
struct PyKvCache {
  py::object k, v, lengths;
};
/// attnkit.PagedKvCache: pages [num_pages, Hk, page_size, D] (and Dv), block_table int32
/// [B, pages_per_sequence], lengths int64 [B].
struct PyPagedKvCache {
  py::object k_pages, v_pages, block_table, lengths;
};

/// A cache's C++ view, of whichever element type and layout its arrays hold.
using CacheVariant =
    std::variant<KvCache<float>, KvCache<bfloat16>, KvCache<float16>, KvCache<q8_0_block>, PagedKvCache<float>,
                 PagedKvCache<bfloat16>, PagedKvCache<float16>, PagedKvCache<q8_0_block>>;

/// The view of a PyKvCache or PyPagedKvCache (its arrays checked: dtypes, ranks, the 8-bit
/// block layout, lengths and block table); an attnkit::invalid_argument for anything else.
CacheVariant cache_view(py::handle cache);

/// True when `object` is an attnkit.KvCache or attnkit.PagedKvCache.
bool is_cache(py::handle object);

/// One call over a cache: q [B, Hq, Lq, D] (float32, bfloat16, float16), out of q's dtype or
/// float32, lse float32 [B, Hq, Lq]; or packed rows: q [1, Hq, total, D] with query_offsets
/// (B + 1 entries; empty for the [B, Hq, Lq, D] form).
struct DecodeViews {
  TensorArg q, out;
  std::optional<TensorArg> lse;
  Options options;
  std::vector<index_t> query_offsets;
};

/// with_element_types for the call's q and out (no double: decode takes float and half q).
template <class F>
void with_decode_types(const DecodeViews& call, F&& f) {
  with_element_types<false>(call.q.dtype, call.out.dtype, std::forward<F>(f));
}

/// attnkit::attention(pattern, q, cache, out[, lse], options) for the module's combinations
/// (decode_kernels.cpp).
void run_decode_combination(const PatternArg& pattern, const CacheVariant& cache, const DecodeViews& call);

/// attnkit.attention(pattern, q, cache, ...): checks, allocates out (and lse), releases the GIL.
py::object decode_attention(py::handle pattern, py::handle q, py::handle cache, py::object out, py::object lse,
                            std::optional<double> scale, int threads, double softcap, py::handle alibi_slopes,
                            bool quantized_query, py::handle query_offsets);

}  // namespace attnkit::python
