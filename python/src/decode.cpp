// KV caches in Python: attnkit.KvCache, attnkit.PagedKvCache, attnkit.append, decode through
// attnkit.attention(pattern, q, cache) and its float64 reference (SPEC.md section 13).

#include <optional>
#include <span>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "attnkit/cache/append.hpp"
#include "attnkit/dispatch.hpp"
#include "attnkit/reference/decode.hpp"
#include "bindings.hpp"
#include "decode_call.hpp"

namespace attnkit::python {

namespace {

constexpr index_t kBlockBytes = sizeof(q8_0_block);

/// The view of one cache array of E: [.., .., .., D] elements, or for 8-bit blocks the uint8
/// array [.., .., .., D / 32, 34] whose blocks lie back to back.
template <class E>
TensorView<E> element_view(const TensorArg& arg) {
  if constexpr (std::is_same_v<E, q8_0_block>) {
    arg.require_dims(5, "[.., Hk, slots, D / 32, 34] bytes of 8-bit blocks");
    if (arg.sizes[4] != kBlockBytes) {
      detail::reject(std::string(arg.name) + ".shape[4]", arg.sizes[4], "must be 34 (the bytes of one 8-bit block)");
    }
    if (arg.strides[4] != 1 || arg.strides[3] != kBlockBytes) {
      detail::reject(std::string(arg.name) + ".strides[3]", arg.strides[3],
                     "must be 34 with unit byte stride: a row's blocks lie back to back");
    }
    std::array<index_t, 4> sizes{}, strides{};
    for (std::size_t axis = 0; axis < 4; ++axis) {
      sizes[axis] = arg.sizes[axis];
      strides[axis] = axis == 3 ? 1 : arg.strides[axis] / kBlockBytes;
      if (axis < 3 && arg.strides[axis] % kBlockBytes != 0) {
        detail::reject(std::string(arg.name) + ".strides[" + std::to_string(axis) + "]", arg.strides[axis],
                       "must be a multiple of 34 bytes (whole 8-bit blocks)");
      }
    }
    if (reinterpret_cast<std::uintptr_t>(arg.data) % alignof(q8_0_block) != 0) {
      detail::reject(std::string(arg.name) + ".data", "odd address", "8-bit blocks must start at an even address");
    }
    return TensorView<E>(static_cast<E*>(arg.data), sizes, strides);
  } else {
    arg.require_dims(4, "[.., Hk, slots, D]");
    return arg.view<E>();
  }
}

std::span<index_t> lengths_view(const TensorArg& arg) {
  arg.require_dims(1, "[B]");
  arg.require_dtype(DType::kInt64, "must be int64 (one length per sequence)");
  arg.require_writable();
  if (arg.sizes[0] > 1 && arg.strides[0] != 1) {
    detail::reject("lengths.strides[0]", arg.strides[0], "must be 1 (a contiguous array)");
  }
  return std::span<index_t>(static_cast<index_t*>(arg.data), static_cast<std::size_t>(arg.sizes[0]));
}

PageTable page_table(const TensorArg& arg) {
  arg.require_dims(2, "[B, pages_per_sequence]");
  arg.require_dtype(DType::kInt32, "must be int32 page ids");
  if (arg.sizes[1] > 1 && arg.strides[1] != 1) {
    detail::reject("block_table.strides[1]", arg.strides[1], "must be 1 (each sequence's page ids contiguous)");
  }
  return PageTable{static_cast<const std::int32_t*>(arg.data), arg.sizes[0], arg.sizes[1], arg.strides[0]};
}

/// f(std::type_identity<E>{}) for the cache element type k's dtype names (v's must equal it).
template <class F>
CacheVariant with_cache_element(const TensorArg& k, const TensorArg& v, F&& f) {
  v.require_dtype(k.dtype, "must equal " + std::string(k.name) + ".dtype = " + std::string(dtype_name(k.dtype)));
  CacheVariant cache;
  with_dtype<float, bfloat16, float16, q8_0_block>(k.dtype, k.name,
                                                   "must be float32, bfloat16, float16 or uint8 (8-bit blocks)",
                                                   [&]<class E>(std::type_identity<E> e) { cache = f(e); });
  return cache;
}

index_t value_dim(const CacheVariant& cache) {
  return std::visit(
      [](const auto& c) {
        using E = cache_element_t<std::decay_t<decltype(c)>>;
        if constexpr (requires { c.v; }) {
          return c.v.dim() * kValuesPerElement<E>;
        } else {
          return c.v_pages.dim() * kValuesPerElement<E>;
        }
      },
      cache);
}

/// The decode entry point of attnkit::dispatch's current target for a registered kind.
void run_dispatched_decode(const dispatch::PatternRef& pattern, const CacheVariant& cache, const DecodeViews& call) {
  std::visit(
      [&](const auto& held_cache) {
        using E = cache_element_t<std::decay_t<decltype(held_cache)>>;
        with_decode_types(call, [&]<class Q, class Out>(std::type_identity<Q>, std::type_identity<Out>) {
          const TensorView<float> lse = call.lse ? call.lse->view<float>() : TensorView<float>();
          dispatch::kernel_table().decode_entries<E>().template get<Q, Out>()(
              pattern, call.q.view<const Q>(), call.query_offsets, dispatch::CacheRef<E>(&held_cache),
              call.out.view<Out>(), call.lse ? &lse : nullptr, call.options);
        });
      },
      cache);
}

void append_rows(py::handle cache_object, py::handle k_object, py::handle v_object, py::handle counts_object) {
  const CacheVariant cache = cache_view(cache_object);
  const TensorArg k = tensor_arg(k_object, "k_new"), v = tensor_arg(v_object, "v_new");
  k.require_dims(4, "[B, Hk, n, D]");
  v.require_dims(4, "[B, Hk, n, Dv]");
  v.require_dtype(k.dtype, "must equal k_new.dtype = " + std::string(dtype_name(k.dtype)));
  const std::optional<std::vector<index_t>> counts =
      counts_object.is_none() ? std::nullopt : std::optional(index_list(counts_object, "counts"));
  const auto run = [&]<class S>(std::type_identity<S>) {
    py::gil_scoped_release unlocked;
    std::visit(
        [&](const auto& c) {
          if (counts) {
            attnkit::append(c, k.view<const S>(), v.view<const S>(), std::span<const index_t>(*counts));
          } else {
            attnkit::append(c, k.view<const S>(), v.view<const S>());
          }
        },
        cache);
  };
  with_dtype<float, bfloat16, float16>(k.dtype, "k_new", "must be float32, bfloat16 or float16", run);
}

/// reference::attention over the cache in float64 (out and lse float64 NumPy arrays).
py::object reference_decode(py::handle pattern_object, py::handle q_object, py::handle cache_object, bool with_lse,
                            std::optional<double> scale, double softcap, py::handle alibi_slopes, bool quantized_query,
                            py::handle query_offsets_object) {
  const PatternArg pattern = pattern_arg(pattern_object);
  const CacheVariant cache = cache_view(cache_object);
  const TensorArg q = tensor_arg(q_object, "q");
  q.require_dims(4, "[B, Hq, Lq, D]");
  py::array_t<double> out({q.sizes[0], q.sizes[1], q.sizes[2], value_dim(cache)});
  py::array_t<double> lse({q.sizes[0], q.sizes[1], q.sizes[2]});
  const TensorArg out_arg = tensor_arg(out, "out"), lse_arg = tensor_arg(lse, "lse");
  Options options;
  options.scale = scale;
  options.quantized_query = quantized_query;
  set_score_modifiers(options, softcap, alibi_slopes);
  const std::vector<index_t> query_offsets =
      query_offsets_object.is_none() ? std::vector<index_t>{} : index_list(query_offsets_object, "query_offsets");
  const auto run = [&]<class Q>(std::type_identity<Q>) {
    py::gil_scoped_release unlocked;
    visit_pattern_arg(pattern, [&]<class P>(const P& held) {
      if constexpr (DecodablePattern<P>) {
        std::visit(
            [&](const auto& c) {
              TensorView<double> lse_view = lse_arg.view<double>();
              if (query_offsets_object.is_none()) {
                reference::attention(held, q.view<const Q>(), c, out_arg.view<double>(), lse_view, options);
              } else {
                reference::attention(held, q.view<const Q>(), query_offsets, c, out_arg.view<double>(), lse_view,
                                     options);
              }
            },
            cache);
      } else {
        detail::reject_undecodable<P>();
      }
    });
  };
  with_dtype<float, bfloat16, float16>(q.dtype, "q", "must be float32, bfloat16 or float16 over a KV cache", run);
  if (with_lse) return py::make_tuple(out, lse);
  return out;
}

}  // namespace

bool is_cache(py::handle object) { return py::isinstance<PyKvCache>(object) || py::isinstance<PyPagedKvCache>(object); }

CacheVariant cache_view(py::handle cache) {
  if (py::isinstance<PyKvCache>(cache)) {
    const auto& held = cache.cast<const PyKvCache&>();
    const TensorArg k = tensor_arg(held.k, "cache.k"), v = tensor_arg(held.v, "cache.v");
    const TensorArg lengths = tensor_arg(held.lengths, "lengths");
    return with_cache_element(k, v, [&]<class E>(std::type_identity<E>) {
      return CacheVariant(KvCache<E>{element_view<E>(k), element_view<E>(v), lengths_view(lengths)});
    });
  }
  if (py::isinstance<PyPagedKvCache>(cache)) {
    const auto& held = cache.cast<const PyPagedKvCache&>();
    const TensorArg k = tensor_arg(held.k_pages, "cache.k_pages"), v = tensor_arg(held.v_pages, "cache.v_pages");
    const TensorArg table = tensor_arg(held.block_table, "block_table");
    const TensorArg lengths = tensor_arg(held.lengths, "lengths");
    return with_cache_element(k, v, [&]<class E>(std::type_identity<E>) {
      return CacheVariant(
          PagedKvCache<E>{element_view<E>(k), element_view<E>(v), page_table(table), lengths_view(lengths)});
    });
  }
  detail::reject("cache", std::string(py::str(py::type::handle_of(cache).attr("__name__"))),
                 "must be an attnkit.KvCache or attnkit.PagedKvCache");
}

py::object decode_attention(py::handle pattern, py::handle q_object, py::handle cache_object, py::object out,
                            py::object lse, std::optional<double> scale, int threads, double softcap,
                            py::handle alibi_slopes, bool quantized_query, py::handle query_offsets) {
  const PatternArg held = pattern_arg(pattern);
  const CacheVariant cache = cache_view(cache_object);
  DecodeViews call{tensor_arg(q_object, "q"), {}, {}, {}, {}};
  call.q.require_dims(4, "[B, Hq, Lq, D]");
  if (call.q.dtype != DType::kFloat32 && call.q.dtype != DType::kBFloat16 && call.q.dtype != DType::kFloat16) {
    detail::reject("q.dtype", dtype_name(call.q.dtype), "must be float32, bfloat16 or float16 over a KV cache");
  }
  const std::vector<index_t> out_sizes{call.q.sizes[0], call.q.sizes[1], call.q.sizes[2], value_dim(cache)};
  if (out.is_none()) out = allocate(call.q.library, call.q.dtype, out_sizes);
  call.out = tensor_arg(out, "out");
  call.out.require_library(call.q.library);
  call.out.require_dims(4, "[B, Hq, Lq, Dv]");
  call.out.require_writable();
  if (call.out.dtype != call.q.dtype && call.out.dtype != DType::kFloat32) {
    detail::reject("out.dtype", dtype_name(call.out.dtype),
                   "must equal q.dtype = " + std::string(dtype_name(call.q.dtype)) + " or be float32");
  }
  if (py::isinstance<py::bool_>(lse)) {
    lse = lse.cast<bool>() ? allocate(call.q.library, DType::kFloat32, {out_sizes[0], out_sizes[1], out_sizes[2]})
                           : py::object(py::none());
  }
  if (!lse.is_none()) {
    TensorArg lse_view = tensor_arg(lse, "lse");
    lse_view.require_library(call.q.library);
    lse_view.require_dims(3, "[B, Hq, Lq]");
    lse_view.require_writable();
    lse_view.require_dtype(DType::kFloat32, "must be float32 over a KV cache");
    call.lse = std::move(lse_view);
  }
  call.options.scale = scale;
  call.options.threads = threads;
  call.options.quantized_query = quantized_query;
  if (!query_offsets.is_none()) call.query_offsets = index_list(query_offsets, "query_offsets");
  set_score_modifiers(call.options, softcap, alibi_slopes);
  {
    py::gil_scoped_release unlocked;
    if (const auto* registered = std::get_if<dispatch::PatternRef>(&held)) {
      run_dispatched_decode(*registered, cache, call);
    } else {
      run_decode_combination(held, cache, call);
    }
  }
  if (lse.is_none()) return out;
  return py::make_tuple(out, lse);
}

void bind_decode(py::module_& m) {
  py::class_<PyKvCache>(m, "KvCache",
                        "A contiguous KV cache: k [B, Hk, capacity, D], v [B, Hk, capacity, Dv] (float32, bfloat16, "
                        "float16; or uint8 [B, Hk, capacity, D / 32, 34]: 8-bit blocks, llama.cpp's Q8_0), "
                        "lengths int64 [B] (tokens held; append advances them). Views, not copies.")
      .def(py::init([](py::object k, py::object v, py::object lengths) {
             PyKvCache cache{std::move(k), std::move(v), std::move(lengths)};
             cache_view(py::cast(cache));  // checks the arrays now
             return cache;
           }),
           py::arg("k"), py::arg("v"), py::arg("lengths"))
      .def_readonly("k", &PyKvCache::k)
      .def_readonly("v", &PyKvCache::v)
      .def_readonly("lengths", &PyKvCache::lengths);
  py::class_<PyPagedKvCache>(m, "PagedKvCache",
                             "A paged KV cache: k_pages [num_pages, Hk, page_size, D], v_pages (Dv), block_table int32 "
                             "[B, pages_per_sequence] (token t of sequence b in page block_table[b, t // page_size]), "
                             "lengths int64 [B]. Element types as KvCache's.")
      .def(py::init([](py::object k_pages, py::object v_pages, py::object block_table, py::object lengths) {
             PyPagedKvCache cache{std::move(k_pages), std::move(v_pages), std::move(block_table), std::move(lengths)};
             cache_view(py::cast(cache));
             return cache;
           }),
           py::arg("k_pages"), py::arg("v_pages"), py::arg("block_table"), py::arg("lengths"))
      .def_readonly("k_pages", &PyPagedKvCache::k_pages)
      .def_readonly("v_pages", &PyPagedKvCache::v_pages)
      .def_readonly("block_table", &PyPagedKvCache::block_table)
      .def_readonly("lengths", &PyPagedKvCache::lengths);
  m.def("append", &append_rows, py::arg("cache"), py::arg("k_new"), py::arg("v_new"), py::arg("counts") = py::none(),
        "Writes k_new [B, Hk, n, D] and v_new [B, Hk, n, Dv] (float32, bfloat16, float16) at each sequence's length, "
        "rounded or quantized to the cache's type, and advances lengths; counts (one per sequence, each in [0, n]): "
        "sequence b takes its first counts[b] rows only (continuous batching). A full cache or a bad page id is a "
        "ValueError with nothing written.");
  py::module_ reference = m.attr("reference").cast<py::module_>();
  reference.def("decode", &reference_decode, py::arg("pattern"), py::arg("q"), py::arg("cache"), py::kw_only(),
                py::arg("lse") = false, py::arg("scale") = py::none(), py::arg("softcap") = 0.0,
                py::arg("alibi_slopes") = py::none(), py::arg("quantized_query") = false,
                py::arg("query_offsets") = py::none(),
                "reference::attention over a KV cache in float64 (8-bit blocks on their dequantized values; with "
                "quantized_query, q quantized to 8-bit blocks first, as the 8-bit query mode does): out "
                "[B, Hq, Lq, Dv] float64 NumPy array, and lse when asked; query_offsets: packed rows as "
                "attnkit.attention takes them.");
}

}  // namespace attnkit::python
