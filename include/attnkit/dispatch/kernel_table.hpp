#pragma once
// The interface between attnkit::dispatch's front door and its per-target kernels
// (src/dispatch/): one table of entry points per instruction set.

#include <span>
#include <type_traits>
#include <variant>

#include "attnkit/cache/kv_cache.hpp"
#include "attnkit/core/call.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/pattern/kinds.hpp"

namespace attnkit::dispatch {

namespace detail {

template <class Layer>
struct PatternPointers;
template <class... Ps>
struct PatternPointers<std::variant<Ps...>> {
  using type = std::variant<const Ps*...>;
  template <class P>
  static constexpr bool holds = (std::is_same_v<P, Ps> || ...);
};

}  // namespace detail

/// The kinds attnkit::dispatch compiles per target: every registered kind (pattern/kinds.hpp:
/// Full, SlidingWindow, Dilated, Global, BlockSparse, BigBird, Linformer, Lsh, KernelizedRpe).
/// Combinations (Union, Intersection, PerHead) and user patterns run attnkit::attention,
/// compiled with the caller's flags.
template <class P>
concept DispatchedPattern = detail::PatternPointers<AnyKind>::holds<P>;

/// A pointer to a pattern of one of those kinds (a pattern may be large: Linformer holds
/// its projections, so the entry points take it by address).
using PatternRef = detail::PatternPointers<AnyKind>::type;

/// The offsets of packed sequences (attnkit/packed.hpp): cu_seqlens_q and cu_seqlens_k.
struct PackedOffsets {
  std::span<const index_t> query_offsets;
  std::span<const index_t> key_offsets;
};

/// attnkit::attention for q, k, v of element type E and out of type Out (E, or float for half
/// E); lse of E's compute type, nullptr for the overload without it; `packed` null for the
/// tensor call, else the offsets of packed sequences (a kind that is not a mask is refused by
/// name).
template <class E, class Out = E>
using AttentionEntry = void (*)(const PatternRef& pattern, const TensorView<const E>& q, const TensorView<const E>& k,
                                const TensorView<const E>& v, const TensorView<Out>& out,
                                const TensorView<compute_type_t<E>>* lse, const Options& options,
                                const PackedOffsets* packed);

/// A KV cache of element type E, contiguous or paged, by address.
template <class E>
using CacheRef = std::variant<const KvCache<E>*, const PagedKvCache<E>*>;

/// attnkit::attention over a KV cache (decode.hpp) for q of element type Q, a cache of E and
/// out of type Out (Q or float); lse float, nullptr for the overload without it;
/// query_offsets empty for q [B, Hq, Lq, D], else the packed rows' offsets (B + 1 entries).
template <class Q, class E, class Out>
using DecodeEntry = void (*)(const PatternRef& pattern, const TensorView<const Q>& q,
                             std::span<const index_t> query_offsets, const CacheRef<E>& cache,
                             const TensorView<Out>& out, const TensorView<float>* lse, const Options& options);

/// The decode entry points for a cache of E: one per query and output type of SPEC.md
/// section 13.
template <class E>
struct DecodeEntries {
  DecodeEntry<float, E, float> float_q;
  DecodeEntry<bfloat16, E, bfloat16> bfloat16_q;
  DecodeEntry<bfloat16, E, float> bfloat16_q_float_out;
  DecodeEntry<float16, E, float16> float16_q;
  DecodeEntry<float16, E, float> float16_q_float_out;

  /// The entry point for q of Q and out of Out.
  template <class Q, class Out>
  DecodeEntry<Q, E, Out> get() const {
    if constexpr (std::is_same_v<Q, float>) {
      return float_q;
    } else if constexpr (std::is_same_v<Q, bfloat16>) {
      if constexpr (std::is_same_v<Out, float>) {
        return bfloat16_q_float_out;
      } else {
        return bfloat16_q;
      }
    } else if constexpr (std::is_same_v<Out, float>) {
      return float16_q_float_out;
    } else {
      return float16_q;
    }
  }
};

/// One target's entry points, one per element-type combination of SPEC.md sections 12 and
/// 13, and the xsimd architecture its code was compiled for (simd::arch_name() in that
/// translation unit: "avx512bw", "avx2", "sse2").
struct KernelTable {
  const char* arch;
  AttentionEntry<float> attention_float;
  AttentionEntry<double> attention_double;
  AttentionEntry<bfloat16> attention_bfloat16;
  AttentionEntry<bfloat16, float> attention_bfloat16_to_float;
  AttentionEntry<float16> attention_float16;
  AttentionEntry<float16, float> attention_float16_to_float;
  DecodeEntries<float> decode_float_cache;
  DecodeEntries<bfloat16> decode_bfloat16_cache;
  DecodeEntries<float16> decode_float16_cache;
  DecodeEntries<q8_0_block> decode_q8_0_cache;

  /// The decode entries for a cache of E.
  template <class E>
  const DecodeEntries<E>& decode_entries() const {
    if constexpr (std::is_same_v<E, float>) {
      return decode_float_cache;
    } else if constexpr (std::is_same_v<E, bfloat16>) {
      return decode_bfloat16_cache;
    } else if constexpr (std::is_same_v<E, float16>) {
      return decode_float16_cache;
    } else {
      return decode_q8_0_cache;
    }
  }
};

}  // namespace attnkit::dispatch

// Defined by src/dispatch/target_kernels.cpp, compiled once per target; each object keeps
// only this symbol global (cmake/AttnkitDispatch.cmake), so the inline functions it
// instantiates with wider instructions cannot replace another target's copies at link time.
extern "C" const attnkit::dispatch::KernelTable* attnkit_dispatch_table_sse2();
extern "C" const attnkit::dispatch::KernelTable* attnkit_dispatch_table_avx2();
extern "C" const attnkit::dispatch::KernelTable* attnkit_dispatch_table_avx512();
