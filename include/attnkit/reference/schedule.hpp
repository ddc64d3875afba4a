#pragma once
// attnkit::reference::attention on the pattern one layer of a Schedule holds (any
// std::variant of patterns, pattern/schedule.hpp).

#include <type_traits>
#include <variant>

#include "attnkit/reference/attention.hpp"

namespace attnkit::reference {

/// reference::attention of whichever kind the layer is.
template <class... Ps, KernelScalar T>
void attention(const std::variant<Ps...>& layer, std::type_identity_t<TensorView<const T>> q,
               std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
               TensorView<T> out, const Options& options = {}) {
  std::visit([&](const auto& pattern) { reference::attention<std::decay_t<decltype(pattern)>, T>(pattern, q, k, v, out, options); },
             layer);
}

/// As above, with the log-sum-exp.
template <class... Ps, KernelScalar T>
void attention(const std::variant<Ps...>& layer, std::type_identity_t<TensorView<const T>> q,
               std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
               TensorView<T> out, TensorView<T> lse, const Options& options = {}) {
  std::visit(
      [&](const auto& pattern) {
        reference::attention<std::decay_t<decltype(pattern)>, T>(pattern, q, k, v, out, lse, options);
      },
      layer);
}

}  // namespace attnkit::reference
