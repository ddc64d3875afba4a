#pragma once
// attnkit::dispatch::attention: attnkit::attention with kernels chosen when the program runs,
// for the CPU it runs on (SSE2, AVX2 + FMA or AVX-512), whatever flags the program was built
// with. Needs the compiled component: target_link_libraries(app PRIVATE attnkit::dispatch)
// (x86-64 only; README "Speed in your own build").
//
//   attnkit::dispatch::attention(attnkit::Full{}, q, k, v, out);
//   attnkit::dispatch::attention(attnkit::Full{.causal = true}, q, paged_cache, out);  // decode
//   std::printf("%s\n", attnkit::simd_target_name(attnkit::dispatch::simd_target()).data());

#include <span>
#include <type_traits>
#include <variant>
#include <vector>

#include "attnkit/cache/decode_rules.hpp"
#include "attnkit/cache/kv_cache.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/element_rules.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/dispatch/kernel_table.hpp"
#include "attnkit/dispatch/simd_target.hpp"

namespace attnkit::dispatch {

/// The target dispatched calls run now: the one set_simd_target chose, else the one the
/// ATTNKIT_SIMD_TARGET environment variable names ("sse2", "avx2", "avx512"; read at the
/// first call), else the widest this CPU and its OS run. Throws attnkit::invalid_argument
/// when ATTNKIT_SIMD_TARGET names no target or one this CPU does not run.
SimdTarget simd_target();

/// The targets this CPU and its OS run, lowest first (sse2 always).
std::vector<SimdTarget> supported_simd_targets();

/// Makes every later dispatched call, from any thread, run `target` (tests, reproducible
/// figures). Throws attnkit::invalid_argument, changing nothing, when this CPU cannot run it.
void set_simd_target(SimdTarget target);

/// The entry points of the current target.
const KernelTable& kernel_table();

/// The current target's entry point for q, k, v of type E and out of type Out.
template <class E, class Out>
AttentionEntry<E, Out> attention_entry() {
  const KernelTable& table = kernel_table();
  if constexpr (std::is_same_v<E, float>) {
    return table.attention_float;
  } else if constexpr (std::is_same_v<E, double>) {
    return table.attention_double;
  } else if constexpr (std::is_same_v<E, bfloat16>) {
    if constexpr (std::is_same_v<Out, float>) {
      return table.attention_bfloat16_to_float;
    } else {
      return table.attention_bfloat16;
    }
  } else {
    if constexpr (std::is_same_v<Out, float>) {
      return table.attention_float16_to_float;
    } else {
      return table.attention_float16;
    }
  }
}

/// A registered kind, or a std::variant of them (a Schedule layer).
template <class P>
struct IsDispatchedPattern : std::bool_constant<DispatchedPattern<P>> {};
template <class P>
concept DispatchedPatternOrVariant = DispatchedPattern<P> || kAllAlternatives<P, IsDispatchedPattern>;

namespace detail {
/// The held kind's entry point, once the element types passed attnkit::attention's checks;
/// `packed` null for the tensor call, else packed sequences' offsets.
template <class P, class Q, class K, class V, class Out, class Lse>
void run(const P& pattern, const TensorView<Q>& q, const TensorView<K>& k, const TensorView<V>& v,
         const TensorView<Out>& out, const TensorView<Lse>* lse, const Options& options,
         const PackedOffsets* packed = nullptr) {
  visit_pattern(pattern, [&]<class Held>(const Held& held) {
    if constexpr (attnkit::detail::check_element_types<Held, Q, K, V, Out, Lse>()) {
      using E = std::remove_const_t<Q>;
      attention_entry<E, Out>()(PatternRef(&held), TensorView<const E>(q), TensorView<const E>(k),
                                TensorView<const E>(v), out, lse, options, packed);
    }
  });
}

/// The held kind's decode entry point, once the element types passed the decode checks.
template <class P, class Q, AnyKvCache Cache, class Out, class Lse>
void run_decode(const P& pattern, const TensorView<Q>& q, const Cache& cache, const TensorView<Out>& out,
                const TensorView<Lse>* lse, const Options& options, std::span<const index_t> query_offsets = {}) {
  if constexpr (attnkit::detail::check_decode_types<Q, Out, Lse>()) {
    using E = cache_element_t<Cache>;
    using QE = std::remove_const_t<Q>;
    const auto run = [&]<class Held>(const Held& held) {
      kernel_table().decode_entries<E>().template get<QE, Out>()(PatternRef(&held), TensorView<const QE>(q),
                                                                 query_offsets, CacheRef<E>(&cache), out, lse, options);
    };
    if constexpr (PatternVariant<P>) {
      std::visit(run, pattern);  // a held kind that cannot decode: the entry point refuses it by name
    } else if constexpr (attnkit::detail::check_decodable<P>()) {
      run(pattern);
    }
  }
}

}  // namespace detail

/// attnkit::attention(pattern, q, k, v, out, options) run by the current target's kernels:
/// the same contract and element types (float, double, bfloat16, float16; half calls with
/// half or float out), and results bitwise identical to attnkit::attention in a program
/// compiled for that target (-march=x86-64, x86-64-v3, x86-64-v4) with the same -O level.
/// `pattern` is a registered kind or a Schedule layer holding one.
template <DispatchedPatternOrVariant P, class Q, class K, class V, class Out>
void attention(const P& pattern, TensorView<Q> q, TensorView<K> k, TensorView<V> v, TensorView<Out> out,
               const Options& options = {}) {
  detail::run(pattern, q, k, v, out, static_cast<const TensorView<attnkit::detail::lse_type_t<Q>>*>(nullptr), options);
}

/// As above, with the per-row log-sum-exp (attnkit::attention's second overload).
template <DispatchedPatternOrVariant P, class Q, class K, class V, class Out, class Lse>
void attention(const P& pattern, TensorView<Q> q, TensorView<K> k, TensorView<V> v, TensorView<Out> out,
               TensorView<Lse> lse, const Options& options = {}) {
  detail::run(pattern, q, k, v, out, &lse, options);
}

/// attnkit::attention on packed sequences (packed.hpp, SPEC.md section 0) run by the current
/// target's kernels: the same contract (a mask kind, or a Schedule layer holding one; another
/// held kind is an invalid_argument naming it) and results bitwise identical to it in a
/// program compiled for that target.
template <DispatchedPatternOrVariant P, class Q, class K, class V, class Out>
void attention(const P& pattern, TensorView<Q> q, std::span<const index_t> query_offsets, TensorView<K> k,
               TensorView<V> v, std::span<const index_t> key_offsets, TensorView<Out> out,
               const Options& options = {}) {
  static_assert(PatternVariant<P> || MaskedPattern<P>,
                "attnkit::dispatch::attention on packed sequences: the pattern must be a mask kind (Full, "
                "SlidingWindow, Dilated, Global, BlockSparse, BigBird)");
  const PackedOffsets packed{query_offsets, key_offsets};
  detail::run(pattern, q, k, v, out, static_cast<const TensorView<attnkit::detail::lse_type_t<Q>>*>(nullptr), options,
              &packed);
}

/// As above, with the per-row log-sum-exp (lse [1, Hq, total_q, 1]).
template <DispatchedPatternOrVariant P, class Q, class K, class V, class Out, class Lse>
void attention(const P& pattern, TensorView<Q> q, std::span<const index_t> query_offsets, TensorView<K> k,
               TensorView<V> v, std::span<const index_t> key_offsets, TensorView<Out> out, TensorView<Lse> lse,
               const Options& options = {}) {
  static_assert(PatternVariant<P> || MaskedPattern<P>,
                "attnkit::dispatch::attention on packed sequences: the pattern must be a mask kind (Full, "
                "SlidingWindow, Dilated, Global, BlockSparse, BigBird)");
  const PackedOffsets packed{query_offsets, key_offsets};
  detail::run(pattern, q, k, v, out, &lse, options, &packed);
}

/// attnkit::attention over a KV cache (decode.hpp, SPEC.md section 13) run by the current
/// target's kernels: the same contract, element types and errors (a Schedule layer holding a
/// kind that cannot decode is an invalid_argument naming it), and results bitwise identical to
/// attnkit::attention over the cache in a program compiled for that target.
template <DispatchedPatternOrVariant P, class Q, AnyKvCache Cache, class Out>
void attention(const P& pattern, TensorView<Q> q, const Cache& cache, TensorView<Out> out,
               const Options& options = {}) {
  detail::run_decode(pattern, q, attnkit::detail::readable_cache(cache), out,
                     static_cast<const TensorView<float>*>(nullptr), options);
}

/// As above, with the per-row log-sum-exp (lse [B, Hq, Lq, 1] float).
template <DispatchedPatternOrVariant P, class Q, AnyKvCache Cache, class Out, class Lse>
void attention(const P& pattern, TensorView<Q> q, const Cache& cache, TensorView<Out> out, TensorView<Lse> lse,
               const Options& options = {}) {
  detail::run_decode(pattern, q, attnkit::detail::readable_cache(cache), out, &lse, options);
}

/// Packed rows, a different count per sequence (attnkit::attention's query_offsets form).
template <DispatchedPatternOrVariant P, class Q, AnyKvCache Cache, class Out>
void attention(const P& pattern, TensorView<Q> q, std::span<const index_t> query_offsets, const Cache& cache,
               TensorView<Out> out, const Options& options = {}) {
  detail::run_decode(pattern, q, attnkit::detail::readable_cache(cache), out,
                     static_cast<const TensorView<float>*>(nullptr), options, query_offsets);
}

/// As above, with the per-row log-sum-exp (lse [1, Hq, total, 1] float).
template <DispatchedPatternOrVariant P, class Q, AnyKvCache Cache, class Out, class Lse>
void attention(const P& pattern, TensorView<Q> q, std::span<const index_t> query_offsets, const Cache& cache,
               TensorView<Out> out, TensorView<Lse> lse, const Options& options = {}) {
  detail::run_decode(pattern, q, attnkit::detail::readable_cache(cache), out, &lse, options, query_offsets);
}

}  // namespace attnkit::dispatch
