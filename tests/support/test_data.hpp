#pragma once
// Seeded test inputs: the three input sets of SPEC.md section 11 in either memory layout.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/rng.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"

namespace attnkit::testing {

/// N(0, 1) by Box-Muller from two counter-derived uniforms keyed by (seed, stream, index).
inline double normal_sample(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  const double u1 = (static_cast<double>(counter_random(seed, stream, 0, index, 0) >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = (static_cast<double>(counter_random(seed, stream, 0, index, 1) >> 11) + 0.5) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

/// SPEC.md section 11 input sets.
enum class InputSet {
  kNormal,  ///< q, k, v ~ N(0, 1)
  kPeaky,   ///< q scaled by 6: near one-hot softmax rows
  kOffset,  ///< every logit shifted by +1e4 (k[:, 0] = 1, q[:, 0] = 1e4 / sigma)
};

inline std::string to_string(InputSet set) {
  switch (set) {
    case InputSet::kNormal:
      return "Normal";
    case InputSet::kPeaky:
      return "Peaky";
    case InputSet::kOffset:
      return "Offset";
  }
  return "?";
}

/// Memory layout of the 4-D buffers.
enum class Layout { kBHLD, kBLHD };

/// One contiguous buffer viewed as [B, H, L, D] in the chosen layout.
template <class T>
struct Tensor {
  Tensor(index_t b, index_t h, index_t l, index_t d, Layout layout)
      : data(static_cast<std::size_t>(b * h * l * d)),
        view(layout == Layout::kBHLD ? bhld(data.data(), b, h, l, d) : blhd(data.data(), b, l, h, d)) {}
  Tensor(const Tensor& other) : data(other.data), view(rebase(other)) {}
  Tensor& operator=(const Tensor&) = delete;

  std::vector<T> data;
  TensorView<T> view;
  TensorView<const T> cview() const { return view; }

  T& at(index_t b, index_t h, index_t l, index_t d) { return view(b, h, l, d); }
  /// Fills with N(0, 1) values keyed by (seed, stream, logical index).
  void fill_normal(std::uint64_t seed, std::uint64_t stream) {
    index_t index = 0;
    for (index_t b = 0; b < view.batch(); ++b)
      for (index_t h = 0; h < view.heads(); ++h)
        for (index_t l = 0; l < view.seq(); ++l)
          for (index_t d = 0; d < view.dim(); ++d)
            at(b, h, l, d) = static_cast<T>(normal_sample(seed, stream, static_cast<std::uint64_t>(index++)));
  }

 private:
  TensorView<T> rebase(const Tensor& other) {
    return TensorView<T>(data.data(), other.view.sizes(), other.view.strides());
  }
};

/// A call's inputs and outputs.
template <class T>
struct Problem {
  Problem(const AttentionShape& s, Layout layout)
      : shape(s),
        q(s.batch, s.q_heads, s.q_len, s.head_dim, layout),
        k(s.batch, s.kv_heads, s.kv_len, s.head_dim, layout),
        v(s.batch, s.kv_heads, s.kv_len, s.value_dim, layout) {}
  AttentionShape shape;
  Tensor<T> q, k, v;
};

/// Inputs of `set` for `shape`, deterministic in `seed`.
template <class T>
Problem<T> make_problem(const AttentionShape& shape, InputSet set, std::uint64_t seed, Layout layout = Layout::kBHLD) {
  Problem<T> p(shape, layout);
  p.q.fill_normal(seed, 1);
  p.k.fill_normal(seed, 2);
  p.v.fill_normal(seed, 3);
  const double sigma = 1.0 / std::sqrt(static_cast<double>(shape.head_dim));
  for (index_t b = 0; b < shape.batch; ++b) {
    for (index_t h = 0; h < shape.q_heads; ++h) {
      for (index_t i = 0; i < shape.q_len; ++i) {
        for (index_t d = 0; d < shape.head_dim; ++d) {
          if (set == InputSet::kPeaky) p.q.at(b, h, i, d) *= T(6);
          if (set == InputSet::kOffset && d == 0) p.q.at(b, h, i, d) = static_cast<T>(1e4 / sigma);
        }
      }
    }
    if (set == InputSet::kOffset) {
      for (index_t h = 0; h < shape.kv_heads; ++h)
        for (index_t j = 0; j < shape.kv_len; ++j) p.k.at(b, h, j, 0) = T(1);
    }
  }
  return p;
}

/// x with each element converted to To (rounded to nearest even for a half type, exact when
/// widening), in the given layout.
template <class To, class From>
Tensor<To> converted(const Tensor<From>& x, Layout layout) {
  const TensorView<From>& v = x.view;
  Tensor<To> result(v.batch(), v.heads(), v.seq(), v.dim(), layout);
  for (index_t b = 0; b < v.batch(); ++b)
    for (index_t h = 0; h < v.heads(); ++h)
      for (index_t l = 0; l < v.seq(); ++l)
        for (index_t d = 0; d < v.dim(); ++d) result.at(b, h, l, d) = store_as<To>(widen(v(b, h, l, d)));
  return result;
}

/// Up to `count` distinct sorted positions in [0, n), deterministic in `seed` (global tokens).
inline std::vector<index_t> random_tokens(index_t n, index_t count, std::uint64_t seed) {
  std::vector<index_t> tokens;
  for (index_t t = 0; t < count && n > 0; ++t) {
    tokens.push_back(
        static_cast<index_t>(mix64(seed * 31 + static_cast<std::uint64_t>(t)) % static_cast<std::uint64_t>(n)));
  }
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  return tokens;
}

/// max |x| over a tensor (0 when empty).
template <class T>
double max_abs(const Tensor<T>& t) {
  double m = 0;
  for (const T& x : t.data) m = std::max(m, std::abs(static_cast<double>(x)));
  return m;
}

}  // namespace attnkit::testing
