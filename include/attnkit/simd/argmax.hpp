#pragma once
// simd::add_signed_argmax: buckets of many rotated vectors at once (Reformer's argmax over
// [y, -y]), vectorised across rows.

#include <cstdint>

#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"

namespace attnkit::simd {

/// For rows j < count of a column-major block (value c of row j at y[c * stride + j]; count
/// and stride multiples of kWidth<T>, y aligned), the argmax a_j over the 2 n values
/// [y_j0 .. y_j(n-1), -y_j0 .. -y_j(n-1)], the first index on ties (as torch.argmax and
/// numpy.argmax): a_j < n when max y >= -min y, else n + the first index of min y. Adds
/// a_j * place to bucket[j] for j < valid (valid <= count; rows past it are padding).
/// Indices are carried as T, exact for n < 2^24. A NaN in y gives some index in [0, 2 n).
template <class T>
void add_signed_argmax(const T* y, index_t stride, index_t n, index_t count, index_t valid, std::int32_t place,
                       std::int32_t* bucket) {
  constexpr index_t kW = static_cast<index_t>(kWidth<T>);
  for (index_t j = 0; j < count; j += kW) {
    Batch<T> top = Batch<T>::load_aligned(y + j), bottom = top;
    Batch<T> top_index(T(0)), bottom_index(T(0));
    for (index_t c = 1; c < n; ++c) {
      const Batch<T> value = Batch<T>::load_aligned(y + c * stride + j);
      const Batch<T> column(static_cast<T>(c));
      const auto higher = value > top, lower = value < bottom;  // strict: the first index stays on ties
      top = xsimd::select(higher, value, top);
      top_index = xsimd::select(higher, column, top_index);
      bottom = xsimd::select(lower, value, bottom);
      bottom_index = xsimd::select(lower, column, bottom_index);
    }
    const Batch<T> index = xsimd::select(top >= -bottom, top_index, bottom_index + Batch<T>(static_cast<T>(n)));
    alignas(64) T lanes[kW];
    index.store_aligned(lanes);
    for (index_t l = 0; l < kW && j + l < valid; ++l) bucket[j + l] += static_cast<std::int32_t>(lanes[l]) * place;
  }
}

}  // namespace attnkit::simd
