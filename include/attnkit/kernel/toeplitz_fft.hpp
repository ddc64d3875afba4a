#pragma once
// Toeplitz products by circulant embedding (SPEC.md section 9): y_i = sum_j c(j - i - delta)
// x_j for i < Lq, j < Lk, delta = Lk - Lq, on kWidth<T> pairs of real columns at once.

#include <algorithm>
#include <cmath>
#include <vector>

#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/lane_fft.hpp"

namespace attnkit::kernel {

/// The smallest power of two >= Lq + Lk - 1 (and >= 4, simd::fft_convolve's least): the circulant that holds every offset
/// j - i of an Lq x Lk Toeplitz matrix without wrapping onto another.
inline index_t circulant_length(index_t q_len, index_t kv_len) {
  index_t length = 4;
  while (length < q_len + kv_len - 1) length *= 2;
  return length;
}

/// The circulant of one Toeplitz matrix and its spectrum. Generator g[s mod L] = c(-s - delta)
/// for s in [-(Lk - 1), Lq - 1], zero elsewhere, so (g * x)_i = sum_j c(j - i - delta) x_j;
/// its DFT is taken in double, divided by L (the inverse transform's factor) and stored as
/// [L x (re, im)] in the forward transform's bit-reversed order.
/// coefficient(t): c_t for offsets t in [-(Lk - 1), Lq - 1].
template <class T, class Coefficient>
void circulant_spectrum(index_t q_len, index_t kv_len, Coefficient&& coefficient, const simd::FftTwiddles<double>& twiddles,
                        double* scratch, T* spectrum) {
  const index_t length = twiddles.length(), shift = kv_len - q_len;
  std::fill(scratch, scratch + 2 * length, 0.0);
  for (index_t s = 0; s < q_len; ++s) scratch[2 * s] = coefficient(-s - shift);
  for (index_t s = 1; s < kv_len; ++s) scratch[2 * (length - s)] = coefficient(s - shift);
  simd::fft_forward_bit_reversed<double>(scratch, twiddles);
  const double inverse_length = 1.0 / static_cast<double>(length);
  for (index_t e = 0; e < 2 * length; ++e) spectrum[e] = static_cast<T>(scratch[e] * inverse_length);
}

/// A batch of 2 kWidth<T> real columns of one Toeplitz product, packed as kWidth<T> complex
/// sequences (column c < W in the real parts of lane c, column W + c in the imaginary parts):
/// the spectrum is that of a real sequence, so one complex convolution carries two real ones
/// (its real and imaginary parts never mix).
/// data: [L x 2 x W] elements, aligned: the transform's scratch.
template <class T>
class ToeplitzBatch {
 public:
  static constexpr index_t kLanes = static_cast<index_t>(simd::kWidth<T>);
  static constexpr index_t kColumns = 2 * kLanes;
  using Point = simd::FftPoint<simd::Batch<T>>;

  ToeplitzBatch(T* data, const simd::FftTwiddles<T>& twiddles) : data_(data), twiddles_(twiddles) {}

  /// The 2 W entries of point j: column c at point(j)[c] (c < W real parts, then imaginary).
  T* point(index_t j) const { return data_ + 2 * kLanes * j; }
  index_t length() const { return twiddles_.length(); }

  /// Streams every column x through its product with the Toeplitz matrix of `spectrum`
  /// (circulant_spectrum): x_j = source(j) for j < Lk (a Point), and sink(i, y_i) for i < Lq.
  template <class Source, class Sink>
  void transform(const T* spectrum, index_t kv_len, Source&& source, index_t q_len, Sink&& sink) const {
    simd::fft_convolve<simd::Batch<T>>(data_, twiddles_, spectrum, kv_len, source, q_len, sink);
  }

  /// The same in place: x_j from point(j) for j < Lk, y_i to point(i) for i < Lq.
  void transform(const T* spectrum, index_t kv_len, index_t q_len) const {
    transform(
        spectrum, kv_len, [this](index_t j) { return Point::load(point(j)); }, q_len,
        [this](index_t i, const Point& y) { y.store(point(i)); });
  }

 private:
  T* data_;
  const simd::FftTwiddles<T>& twiddles_;
};

}  // namespace attnkit::kernel
