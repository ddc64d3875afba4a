// attnkit.attention, attnkit.reference.attention and attnkit.dispatch: argument checks,
// output allocation, the GIL released around the kernels.

#include <chrono>
#include <optional>
#include <string>

#include <pybind11/stl.h>

#include "attnkit/core/score_modifiers.hpp"
#include "attnkit/dispatch.hpp"
#include "bindings.hpp"
#include "call_views.hpp"
#include "decode_call.hpp"

namespace attnkit::python {

namespace {

/// The call's outputs as Python objects (given or allocated) and their views.
struct PreparedCall {
  CallViews views;
  py::object out, lse;
};

/// Which output dtypes a call accepts: the kernels' rules, or the reference's float64.
enum class Outputs { kKernel, kReference };

bool is_half(DType dtype) { return dtype == DType::kBFloat16 || dtype == DType::kFloat16; }

PreparedCall prepare(py::handle q_object, py::handle k_object, py::handle v_object, py::object out, py::object lse,
                     std::optional<double> scale, int threads, py::handle key_lengths, Outputs outputs) {
  PreparedCall call{
      {tensor_arg(q_object, "q"), tensor_arg(k_object, "k"), tensor_arg(v_object, "v"), {}, {}, {}, false, {}, {}},
      std::move(out),
      std::move(lse)};
  CallViews& views = call.views;
  views.q.require_dims(4, "[B, Hq, Lq, D]");
  views.k.require_dims(4, "[B, Hk, Lk, D]");
  views.v.require_dims(4, "[B, Hk, Lk, Dv]");
  views.k.require_library(views.q.library);
  views.v.require_library(views.q.library);
  if (!is_floating(views.q.dtype)) {
    detail::reject("q.dtype", dtype_name(views.q.dtype), "must be float32, float64, bfloat16 or float16");
  }
  const std::string same = "must equal q.dtype = " + std::string(dtype_name(views.q.dtype));
  views.k.require_dtype(views.q.dtype, same);
  views.v.require_dtype(views.q.dtype, same);
  const DType compute =
      views.q.dtype == DType::kFloat64 || outputs == Outputs::kReference ? DType::kFloat64 : DType::kFloat32;
  const DType out_default = outputs == Outputs::kReference ? DType::kFloat64 : views.q.dtype;
  const std::vector<index_t> out_sizes{views.q.sizes[0], views.q.sizes[1], views.q.sizes[2], views.v.sizes[3]};

  if (call.out.is_none()) call.out = allocate(views.q.library, out_default, out_sizes);
  views.out = tensor_arg(call.out, "out");
  views.out.require_library(views.q.library);
  views.out.require_dims(4, "[B, Hq, Lq, Dv]");
  views.out.require_writable();
  if (outputs == Outputs::kReference) {
    views.out.require_dtype(DType::kFloat64, "the reference writes float64");
  } else if (views.out.dtype != views.q.dtype && !(is_half(views.q.dtype) && views.out.dtype == DType::kFloat32)) {
    detail::reject("out.dtype", dtype_name(views.out.dtype),
                   "must equal q.dtype = " + std::string(dtype_name(views.q.dtype)) + " (or float32 for half q)");
  }

  if (py::isinstance<py::bool_>(call.lse)) {
    call.lse = call.lse.cast<bool>() ? allocate(views.q.library, compute, {out_sizes[0], out_sizes[1], out_sizes[2]})
                                     : py::object(py::none());
  }
  if (!call.lse.is_none()) {
    TensorArg lse_view = tensor_arg(call.lse, "lse");
    lse_view.require_library(views.q.library);
    lse_view.require_dims(3, "[B, Hq, Lq]");
    lse_view.require_writable();
    lse_view.require_dtype(compute, "must be " + std::string(dtype_name(compute)) +
                                        (compute == DType::kFloat64 ? " for this call" : " for float and half calls"));
    views.lse = std::move(lse_view);
  }

  views.options.scale = scale;
  views.options.threads = threads;
  if (!key_lengths.is_none()) views.options.key_lengths = index_list(key_lengths, "key_lengths");
  return call;
}

/// global_qkv = (qg, kg, vg): arrays of q's library and dtype shaped as q, k and v.
GlobalViews global_views(py::handle global_qkv, const CallViews& call) {
  if (!py::isinstance<py::tuple>(global_qkv) && !py::isinstance<py::list>(global_qkv)) {
    detail::reject("global_qkv", std::string(py::str(py::type::of(global_qkv).attr("__name__"))),
                   "must be a tuple (qg, kg, vg) of arrays shaped as q, k and v");
  }
  const py::sequence items = py::reinterpret_borrow<py::sequence>(global_qkv);
  if (py::len(items) != 3) {
    detail::reject("len(global_qkv)", py::len(items), "must be 3: (qg, kg, vg) shaped as q, k and v");
  }
  GlobalViews global{tensor_arg(items[0], "global_qkv[0]"), tensor_arg(items[1], "global_qkv[1]"),
                     tensor_arg(items[2], "global_qkv[2]")};
  const std::string same = "must equal q.dtype = " + std::string(dtype_name(call.q.dtype));
  for (TensorArg* arg : {&global.q, &global.k, &global.v}) {
    arg->require_library(call.q.library);
    arg->require_dims(4, "[B, H, L, D] (shaped as q, k and v)");
    arg->require_dtype(call.q.dtype, same);
  }
  global.q.require_sizes(call.q.sizes, "must equal q's sizes");
  global.k.require_sizes(call.k.sizes, "must equal k's sizes");
  global.v.require_sizes(call.v.sizes, "must equal v's sizes");
  return global;
}

/// Packed sequences on tensors: query_offsets and key_offsets (int64 [B + 1] each) given
/// together, or neither.
void set_packed_offsets(CallViews& views, py::handle query_offsets, py::handle key_offsets) {
  if (query_offsets.is_none() != key_offsets.is_none()) {
    detail::reject(query_offsets.is_none() ? "key_offsets" : "query_offsets", "given",
                   "packed sequences on tensors take query_offsets and key_offsets together (cu_seqlens_q, "
                   "cu_seqlens_k)");
  }
  if (query_offsets.is_none()) return;
  views.packed = true;
  views.query_offsets = index_list(query_offsets, "query_offsets");
  views.key_offsets = index_list(key_offsets, "key_offsets");
}

py::object result(const PreparedCall& call) {
  if (call.lse.is_none()) return call.out;
  return py::make_tuple(call.out, call.lse);
}

/// A registered kind through attnkit::dispatch's current target.
void run_dispatched(const dispatch::PatternRef& pattern, const CallViews& call) {
  with_call_types(call, [&]<class E, class Out>(std::type_identity<E>, std::type_identity<Out>) {
    const TensorView<compute_type_t<E>> lse =
        call.lse ? call.lse->view<compute_type_t<E>>() : TensorView<compute_type_t<E>>();
    const dispatch::PackedOffsets packed{call.query_offsets, call.key_offsets};
    dispatch::attention_entry<E, Out>()(pattern, call.q.view<const E>(), call.k.view<const E>(), call.v.view<const E>(),
                                        call.out.view<Out>(), call.lse ? &lse : nullptr, call.options,
                                        call.packed ? &packed : nullptr);
  });
}

void run_kernels(const PatternArg& pattern, const CallViews& call) {
  std::visit(
      [&](const auto& held) {
        using Held = std::decay_t<decltype(held)>;
        if constexpr (std::is_same_v<Held, dispatch::PatternRef>) {
          run_dispatched(held, call);
        } else if constexpr (std::is_same_v<Held, const UnionKinds*>) {
          run_union(*held, call);
        } else if constexpr (std::is_same_v<Held, const IntersectionKinds*>) {
          run_intersection(*held, call);
        } else {
          run_per_head(*held, call);
        }
      },
      pattern);
}

constexpr const char* kAttentionDoc =
    "attention(pattern, q, k, v, *, out=None, lse=None, scale=None, threads=0, key_lengths=None, global_qkv=None,\n"
    "softcap=0.0, alibi_slopes=None)\n\n"
    "q [B, Hq, Lq, D], k [B, Hk, Lk, D], v [B, Hk, Lk, Dv] (NumPy arrays or torch CPU tensors, one dtype:\n"
    "float32, float64, bfloat16 (torch) or float16; any strides with a unit last one). Returns out\n"
    "[B, Hq, Lq, Dv] (q's dtype, allocated by q's library; or `out`, written in place: q's dtype or\n"
    "float32 for half q) and, when `lse` is True or an array [B, Hq, Lq] (float32; float64 for\n"
    "float64 calls), (out, lse). scale: logit scale (1/sqrt(D)); threads: 0 = OpenMP's default;\n"
    "key_lengths: per-batch key padding (Linformer); global_qkv: (qg, kg, vg) shaped as q, k, v, Longformer's\n"
    "separate global projections, for a Global or Union(SlidingWindow or Dilated, Global) pattern: its global rows\n"
    "attend every key through qg, kg, vg. softcap: s <- softcap tanh(s / softcap) (Gemma 2; 0 = off);\n"
    "alibi_slopes: one slope per query head, s <- s - m_h |p - j| (attnkit.alibi_slopes(Hq) gives the standard\n"
    "ones); both on mask kinds, in prefill and over caches. Inputs are never copied; the GIL is released.\n\n"
    "attention(pattern, q, cache, *, out=None, lse=None, scale=None, threads=0, softcap=0.0, alibi_slopes=None,\n"
    "quantized_query=False, query_offsets=None): decode over an attnkit.KvCache or\n"
    "PagedKvCache: q [B, Hq, Lq, D] (any Lq: more than 64 rows run the prefill schedule; float32, bfloat16,\n"
    "float16) at each sequence's last Lq positions;\n"
    "out of q's dtype or float32, lse float32. quantized_query (8-bit caches only): the 8-bit query mode, q\n"
    "quantized to 8-bit blocks and the scores integer dot products (ggml/llama.cpp's semantics of an 8-bit cache).\n"
    "query_offsets (int64 [B + 1], flash-attn's cu_seqlens_q): packed rows, a different count per sequence:\n"
    "q [1, Hq, total, D] holds sequence b's rows at query_offsets[b] .. query_offsets[b + 1] - 1 (out, lse alike).\n\n"
    "attention(pattern, q, k, v, *, query_offsets, key_offsets, ...): packed sequences (flash-attn's varlen\n"
    "layout): q [1, Hq, total_q, D], k and v [1, Hk, total_k, .], query_offsets and key_offsets (int64 [B + 1]:\n"
    "cu_seqlens_q, cu_seqlens_k); sequence b's rows are the tensor call on its own rows and keys (the pattern cut\n"
    "to its length), the same bits; mask kinds and their combinations.";

}  // namespace

void bind_attention(py::module_& m) {
  m.def("alibi_slopes", &alibi_slopes, py::arg("heads"),
        "ALiBi's standard slopes for `heads` query heads (Press et al. 2022's get_slopes): 2^(-8 (h + 1) / H) for a "
        "power of two H, else the slopes of the power of two below followed by every other slope of twice it.");
  m.def(
      "attention",
      [](py::handle pattern, py::handle q, py::handle k, py::handle v, py::object out, py::object lse,
         std::optional<double> scale, int threads, py::handle key_lengths, py::handle global_qkv, double softcap,
         py::handle alibi_slopes, bool quantized_query, py::handle query_offsets, py::handle key_offsets) {
        if (is_cache(k)) {
          if (!key_offsets.is_none()) {
            detail::reject("key_offsets", "given", "must be omitted over a KV cache (the cache's lengths)");
          }
          if (!v.is_none()) detail::reject("v", "given", "must be omitted over a KV cache (the cache holds V)");
          if (!key_lengths.is_none()) {
            detail::reject("key_lengths", "given", "must be omitted over a KV cache (the cache's lengths)");
          }
          if (!global_qkv.is_none()) {
            detail::reject("global_qkv", "given", "must be omitted over a KV cache (tensor calls only)");
          }
          return decode_attention(pattern, q, k, std::move(out), std::move(lse), scale, threads, softcap, alibi_slopes,
                                  quantized_query, query_offsets);
        }
        if (quantized_query) {
          detail::reject("quantized_query", "True", "applies to attention over an 8-bit KV cache, not to tensors");
        }
        const PatternArg held = pattern_arg(pattern);
        PreparedCall call =
            prepare(q, k, v, std::move(out), std::move(lse), scale, threads, key_lengths, Outputs::kKernel);
        set_score_modifiers(call.views.options, softcap, alibi_slopes);
        set_packed_offsets(call.views, query_offsets, key_offsets);
        if (call.views.packed && !global_qkv.is_none()) {
          detail::reject("global_qkv", "given", "applies to the tensor call, not to packed sequences");
        }
        const std::optional<GlobalViews> global =
            global_qkv.is_none() ? std::nullopt : std::optional<GlobalViews>(global_views(global_qkv, call.views));
        {
          py::gil_scoped_release unlocked;
          if (global) {
            run_global_projections(held, call.views, *global);
          } else {
            run_kernels(held, call.views);
          }
        }
        return result(call);
      },
      py::arg("pattern"), py::arg("q"), py::arg("k"), py::arg("v") = py::none(), py::kw_only(),
      py::arg("out") = py::none(), py::arg("lse") = py::none(), py::arg("scale") = py::none(), py::arg("threads") = 0,
      py::arg("key_lengths") = py::none(), py::arg("global_qkv") = py::none(), py::arg("softcap") = 0.0,
      py::arg("alibi_slopes") = py::none(), py::arg("quantized_query") = false, py::arg("query_offsets") = py::none(),
      py::arg("key_offsets") = py::none(), kAttentionDoc);

  m.def(
      "_native_call_ns",
      [](py::handle pattern, py::handle q, py::handle k, py::handle v, py::object out, int threads) {
        const PatternArg held = pattern_arg(pattern);
        const PreparedCall call =
            prepare(q, k, v, std::move(out), py::none(), std::nullopt, threads, py::none(), Outputs::kKernel);
        py::gil_scoped_release unlocked;
        const auto start = std::chrono::steady_clock::now();
        run_kernels(held, call.views);
        return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
      },
      py::arg("pattern"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("threads") = 0,
      "Benchmarks: the nanoseconds of attnkit.attention's C++ call alone (the kernels attention runs, on arguments "
      "checked beforehand, untimed), so a benchmark can pair it with the Python call (bench/python).");

  py::module_ reference = m.def_submodule("reference", "The float64 reference of every kind (SPEC.md's definitions).");
  reference.def(
      "attention",
      [](py::handle pattern, py::handle q, py::handle k, py::handle v, py::object out, py::object lse,
         std::optional<double> scale, py::handle key_lengths, double softcap, py::handle alibi_slopes) {
        const PatternArg held = pattern_arg(pattern);
        PreparedCall call =
            prepare(q, k, v, std::move(out), std::move(lse), scale, 0, key_lengths, Outputs::kReference);
        set_score_modifiers(call.views.options, softcap, alibi_slopes);
        if (call.views.q.dtype == DType::kFloat32) {
          detail::reject("q.dtype", "float32",
                         "the reference takes float64, bfloat16 or float16 (widen float32 first)");
        }
        {
          py::gil_scoped_release unlocked;
          run_reference(held, call.views);
        }
        return result(call);
      },
      py::arg("pattern"), py::arg("q"), py::arg("k"), py::arg("v"), py::kw_only(), py::arg("out") = py::none(),
      py::arg("lse") = py::none(), py::arg("scale") = py::none(), py::arg("key_lengths") = py::none(),
      py::arg("softcap") = 0.0, py::arg("alibi_slopes") = py::none(),
      "The closed-form float64 result (O(Lq Lk) per head): q, k, v float64 or half; out and lse float64.");

  py::module_ dispatched = m.def_submodule(
      "dispatch",
      "The registered kinds compiled for SSE2, AVX2 and AVX-512, the widest this CPU runs chosen at run time.");
  py::enum_<SimdTarget>(dispatched, "SimdTarget")
      .value("sse2", SimdTarget::kSse2)
      .value("avx2", SimdTarget::kAvx2)
      .value("avx512", SimdTarget::kAvx512);
  dispatched.def("simd_target", &dispatch::simd_target, "The target dispatched calls run now.");
  dispatched.def("supported_simd_targets", &dispatch::supported_simd_targets, "The targets this CPU runs.");
  dispatched.def("set_simd_target", &dispatch::set_simd_target, py::arg("target"),
                 "Every later dispatched call runs `target` (ValueError when this CPU cannot).");
  dispatched.def(
      "attention",
      [](py::handle pattern, py::handle q, py::handle k, py::handle v, py::object out, py::object lse,
         std::optional<double> scale, int threads, py::handle key_lengths, double softcap, py::handle alibi_slopes,
         py::handle query_offsets, py::handle key_offsets) {
        const PatternArg held = pattern_arg(pattern);
        const auto* registered = std::get_if<dispatch::PatternRef>(&held);
        if (registered == nullptr) {
          detail::reject("pattern", std::string(py::repr(pattern)),
                         "attnkit.dispatch runs the registered kinds (attnkit.kinds); combinations run "
                         "attnkit.attention");
        }
        PreparedCall call =
            prepare(q, k, v, std::move(out), std::move(lse), scale, threads, key_lengths, Outputs::kKernel);
        set_score_modifiers(call.views.options, softcap, alibi_slopes);
        set_packed_offsets(call.views, query_offsets, key_offsets);
        {
          py::gil_scoped_release unlocked;
          run_dispatched(*registered, call.views);
        }
        return result(call);
      },
      py::arg("pattern"), py::arg("q"), py::arg("k"), py::arg("v"), py::kw_only(), py::arg("out") = py::none(),
      py::arg("lse") = py::none(), py::arg("scale") = py::none(), py::arg("threads") = 0,
      py::arg("key_lengths") = py::none(), py::arg("softcap") = 0.0, py::arg("alibi_slopes") = py::none(),
      py::arg("query_offsets") = py::none(), py::arg("key_offsets") = py::none(),
      "attnkit.attention for a registered kind, on the current target's kernels.");
}

}  // namespace attnkit::python
