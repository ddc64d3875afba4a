#pragma once
// attnkit::reference::attention: the float64 reference of every kind, chosen by concept.
// Mask-like kinds go through the dense mu_ij evaluation of SPEC.md section 0
// (reference/masked.hpp); kinds that are not masks bring their own (reference/<kind>.hpp).
// A Schedule layer (a std::variant of patterns) runs the reference of the kind it holds.

#include <type_traits>
#include <variant>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/reference/kernelized_rpe.hpp"
#include "attnkit/reference/linformer.hpp"
#include "attnkit/reference/lsh.hpp"
#include "attnkit/reference/masked.hpp"
#include "attnkit/reference/own_reference.hpp"

namespace attnkit::reference {

/// The kinds reference::attention evaluates.
template <class P>
concept ReferencedPattern = MaskedPattern<P> || SelfReferencedPattern<P>;

/// A std::variant of referenced patterns (a Schedule layer).
template <class P>
struct IsReferencedPattern : std::bool_constant<ReferencedPattern<P>> {};
template <class V>
concept ReferencedVariant = kAllAlternatives<V, IsReferencedPattern>;

namespace detail {

/// The pattern's closed form accumulated in Acc (double for reference::attention).
template <class Acc, class T, ReferencedPattern P>
void evaluate(const P& pattern, const TensorView<const T>& q, const TensorView<const T>& k,
              const TensorView<const T>& v, const TensorView<T>& out, const TensorView<T>* lse,
              const Options& options) {
  if constexpr (MaskedPattern<P>) {
    dense_attention<Acc, T>(pattern, q, k, v, out, lse, options);
  } else {
    OwnReference<P>::template evaluate<Acc, T>(pattern, q, k, v, out, lse, options);
  }
}

}  // namespace detail

/// Same contract as attnkit::attention, computed straight from SPEC.md's definition in
/// double, for tests and for users who want to check a result; O(Lq Lk) time per head.
/// `pattern` may be a std::variant of referenced patterns (a Schedule layer).
template <class P, KernelScalar T>
requires ReferencedPattern<P> || ReferencedVariant<P>
void attention(const P& pattern, std::type_identity_t<TensorView<const T>> q,
               std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
               TensorView<T> out, const Options& options = {}) {
  visit_pattern(pattern, [&](const auto& held) { detail::evaluate<double, T>(held, q, k, v, out, nullptr, options); });
}

/// As above, also writing the natural-log log-sum-exp per row into lse [B, Hq, Lq, 1].
template <class P, KernelScalar T>
requires ReferencedPattern<P> || ReferencedVariant<P>
void attention(const P& pattern, std::type_identity_t<TensorView<const T>> q,
               std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
               TensorView<T> out, TensorView<T> lse, const Options& options = {}) {
  visit_pattern(pattern, [&](const auto& held) { detail::evaluate<double, T>(held, q, k, v, out, &lse, options); });
}

}  // namespace attnkit::reference
