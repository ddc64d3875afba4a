#pragma once
// attnkit::dispatch::attention: attnkit::attention with kernels chosen when the program runs,
// for the CPU it runs on (SSE2, AVX2 + FMA or AVX-512), whatever flags the program was built
// with. Needs the compiled component: target_link_libraries(app PRIVATE attnkit::dispatch)
// (x86-64 only; README "Speed in your own build").
//
//   attnkit::dispatch::attention(attnkit::Full{}, q, k, v, out);
//   std::printf("%s\n", attnkit::simd_target_name(attnkit::dispatch::simd_target()).data());

#include <type_traits>
#include <variant>
#include <vector>

#include "attnkit/core/concepts.hpp"
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

/// The current target's entry point for T.
template <KernelScalar T>
AttentionEntry<T> attention_entry() {
  if constexpr (std::is_same_v<T, float>) {
    return kernel_table().attention_float;
  } else {
    return kernel_table().attention_double;
  }
}

/// A registered kind, or a std::variant of them (a Schedule layer).
template <class P>
struct IsDispatchedPattern : std::bool_constant<DispatchedPattern<P>> {};
template <class P>
concept DispatchedPatternOrVariant = DispatchedPattern<P> || kAllAlternatives<P, IsDispatchedPattern>;

/// attnkit::attention(pattern, q, k, v, out, options) run by the current target's kernels:
/// the same contract, and results bitwise identical to attnkit::attention in a program
/// compiled for that target (-march=x86-64, x86-64-v3, x86-64-v4) with the same -O level.
/// `pattern` is a registered kind or a Schedule layer holding one.
template <DispatchedPatternOrVariant P, KernelScalar T>
void attention(const P& pattern, std::type_identity_t<TensorView<const T>> q,
               std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
               TensorView<T> out, const Options& options = {}) {
  visit_pattern(pattern,
                [&](const auto& held) { attention_entry<T>()(PatternRef(&held), q, k, v, out, nullptr, options); });
}

/// As above, with the per-row log-sum-exp (attnkit::attention's second overload).
template <DispatchedPatternOrVariant P, KernelScalar T>
void attention(const P& pattern, std::type_identity_t<TensorView<const T>> q,
               std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
               TensorView<T> out, TensorView<T> lse, const Options& options = {}) {
  visit_pattern(pattern,
                [&](const auto& held) { attention_entry<T>()(PatternRef(&held), q, k, v, out, &lse, options); });
}

}  // namespace attnkit::dispatch
