#pragma once
// attnkit::reference::attention: the float64 reference of every kind, chosen by concept.
// Mask-like kinds go through the dense mu_ij evaluation of SPEC.md section 0
// (reference/masked.hpp); kinds that are not masks bring their own (reference/<kind>.hpp).
// A Schedule layer (a std::variant of patterns) runs the reference of the kind it holds.

#include <type_traits>
#include <variant>
#include <vector>

#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"
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
    if (options.softcap != 0 || !options.alibi_slopes.empty()) {
      attnkit::detail::reject("options.softcap", options.softcap,
                              "score modifiers (softcap, alibi_slopes) apply to mask kinds only (SPEC.md section 14)");
    }
    OwnReference<P>::template evaluate<Acc, T>(pattern, q, k, v, out, lse, options);
  }
}

/// A view's elements widened exactly to double, in a contiguous [B, H, L, D] buffer.
template <class E>
std::vector<double> widened(const TensorView<const E>& x) {
  std::vector<double> result;
  result.reserve(static_cast<std::size_t>(x.batch() * x.heads() * x.seq() * x.dim()));
  for (index_t b = 0; b < x.batch(); ++b)
    for (index_t h = 0; h < x.heads(); ++h)
      for (index_t l = 0; l < x.seq(); ++l)
        for (index_t d = 0; d < x.dim(); ++d) result.push_back(static_cast<double>(widen(x(b, h, l, d))));
  return result;
}

/// Half q, k, v: the float64 reference on their values widened exactly to double, stored into
/// out (and lse) of type double, float or the inputs' type (rounded to nearest even).
template <class P, HalfType E, class Out, class Lse>
void evaluate_half(const P& pattern, const TensorView<const E>& q, const TensorView<const E>& k,
                   const TensorView<const E>& v, const TensorView<Out>& out, const TensorView<Lse>* lse,
                   const Options& options) {
  static_assert(std::is_same_v<Out, double> || std::is_same_v<Out, float> || std::is_same_v<Out, E>,
                "reference::attention of half inputs writes out as double, float or their own type");
  static_assert(std::is_same_v<Lse, double> || std::is_same_v<Lse, float>,
                "reference::attention writes lse as double or float");
  attnkit::detail::validate_call<E>(q, k, v, out, lse, options);
  const auto as_view = [](std::vector<double>& data, const TensorView<const E>& like) {
    return bhld(static_cast<const double*>(data.data()), like.batch(), like.heads(), like.seq(), like.dim());
  };
  std::vector<double> q64 = widened(q), k64 = widened(k), v64 = widened(v);
  std::vector<double> out64(static_cast<std::size_t>(out.batch() * out.heads() * out.seq() * out.dim()));
  std::vector<double> lse64(static_cast<std::size_t>(out.batch() * out.heads() * out.seq()));
  const TensorView<double> out_view = bhld(out64.data(), out.batch(), out.heads(), out.seq(), out.dim());
  const TensorView<double> lse_view = bhld(lse64.data(), out.batch(), out.heads(), out.seq(), 1);
  visit_pattern(pattern, [&](const auto& held) {
    evaluate<double, double>(held, as_view(q64, q), as_view(k64, k), as_view(v64, v), out_view,
                             lse != nullptr ? &lse_view : nullptr, options);
  });
  for (index_t b = 0; b < out.batch(); ++b)
    for (index_t h = 0; h < out.heads(); ++h)
      for (index_t i = 0; i < out.seq(); ++i) {
        for (index_t d = 0; d < out.dim(); ++d) out(b, h, i, d) = store_as<Out>(out_view(b, h, i, d));
        if (lse != nullptr) (*lse)(b, h, i, 0) = static_cast<Lse>(lse_view(b, h, i, 0));
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

/// Half-precision q, k and v (one type, bfloat16 or float16): the reference on their values
/// widened exactly to double (SPEC.md section 12), written to out as double, float or the
/// inputs' type.
template <class P, class Q, class K, class V, class Out>
requires(ReferencedPattern<P> || ReferencedVariant<P>) && HalfType<std::remove_const_t<Q>> void attention(
                                                              const P& pattern, TensorView<Q> q, TensorView<K> k,
                                                              TensorView<V> v, TensorView<Out> out,
                                                              const Options& options = {}) {
  using E = std::remove_const_t<Q>;
  static_assert(std::is_same_v<E, std::remove_const_t<K>> && std::is_same_v<E, std::remove_const_t<V>>,
                "reference::attention: q, k and v must have one element type");
  detail::evaluate_half<P, E, Out, double>(pattern, q, k, v, out, nullptr, options);
}

/// As above, also writing the log-sum-exp (double or float).
template <class P, class Q, class K, class V, class Out, class Lse>
requires(ReferencedPattern<P> || ReferencedVariant<P>) && HalfType<std::remove_const_t<Q>> void attention(
                                                              const P& pattern, TensorView<Q> q, TensorView<K> k,
                                                              TensorView<V> v, TensorView<Out> out, TensorView<Lse> lse,
                                                              const Options& options = {}) {
  using E = std::remove_const_t<Q>;
  static_assert(std::is_same_v<E, std::remove_const_t<K>> && std::is_same_v<E, std::remove_const_t<V>>,
                "reference::attention: q, k and v must have one element type");
  detail::evaluate_half<P, E, Out, Lse>(pattern, q, k, v, out, &lse, options);
}

}  // namespace attnkit::reference
