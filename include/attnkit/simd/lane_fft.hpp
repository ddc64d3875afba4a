#pragma once
// Complex FFTs of power-of-two length on many sequences at once, one sequence per SIMD lane
// (FFT-RPE's thousands of same-length Toeplitz products per head, SPEC.md section 9).
//
// Layout of a batch of kWidth<T> sequences of length L: point p occupies 2 vectors, the real
// parts of every lane's p-th entry, then the imaginary parts ([L x 2 x kWidth] elements,
// aligned). Butterflies are then plain vector arithmetic with broadcast twiddles: no shuffle,
// any lane count, and the scalar instantiation (one lane, a plain T) runs the same code.
//
// The forward transform is decimation in frequency and leaves the spectrum in bit-reversed
// order; the inverse is decimation in time and takes it in that order: a convolution multiplies
// two spectra pointwise, which does not care about their order, so neither direction needs a
// bit-reversal permutation. Both recurse depth-first until a sub-transform fits in L2, then
// run their radix-2 passes inside it.

#include <cmath>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"

namespace attnkit::simd {

/// w^k = exp(-2 pi i k / L) for k < L / 2 (computed in double), L a power of two >= 2.
template <class T>
class FftTwiddles {
 public:
  explicit FftTwiddles(index_t length) : length_(length), re_(static_cast<std::size_t>(length / 2)), im_(re_.size()) {
    constexpr double kTwoPi = 6.283185307179586476925286766559;
    for (index_t k = 0; k < length / 2; ++k) {
      const double angle = -kTwoPi * static_cast<double>(k) / static_cast<double>(length);
      re_[static_cast<std::size_t>(k)] = static_cast<T>(std::cos(angle));
      im_[static_cast<std::size_t>(k)] = static_cast<T>(std::sin(angle));
    }
  }
  index_t length() const { return length_; }
  T re(index_t k) const { return re_[static_cast<std::size_t>(k)]; }
  T im(index_t k) const { return im_[static_cast<std::size_t>(k)]; }

 private:
  index_t length_;
  std::vector<T> re_, im_;
};

namespace detail {

/// One lane (a plain scalar) or kWidth<S> lanes (Batch<S>) of complex points stored as
/// [re lanes][im lanes].
template <class V>
struct LaneOps {
  using Scalar = V;
  static constexpr index_t kLanes = 1;
  static V load(const Scalar* p) { return *p; }
  static void store(Scalar* p, V value) { *p = value; }
  static V mul_add(V a, V b, V c) { return std::fma(a, b, c); }
  static V mul_sub(V a, V b, V c) { return std::fma(a, b, -c); }  // a * b - c
};
template <class S>
struct LaneOps<Batch<S>> {
  using Scalar = S;
  static constexpr index_t kLanes = static_cast<index_t>(kWidth<S>);
  static Batch<S> load(const S* p) { return Batch<S>::load_aligned(p); }
  static void store(S* p, Batch<S> value) { value.store_aligned(p); }
  static Batch<S> mul_add(Batch<S> a, Batch<S> b, Batch<S> c) { return simd::fma(a, b, c); }
  static Batch<S> mul_sub(Batch<S> a, Batch<S> b, Batch<S> c) { return simd::fma(a, b, -c); }
};

/// One point of every lane: the real parts and the imaginary parts.
template <class V>
struct LanePoint {
  V re, im;
  using Ops = LaneOps<V>;
  using Scalar = typename Ops::Scalar;
  static LanePoint load(const Scalar* p) { return LanePoint{Ops::load(p), Ops::load(p + Ops::kLanes)}; }
  void store(Scalar* p) const {
    Ops::store(p, re);
    Ops::store(p + Ops::kLanes, im);
  }
  LanePoint operator+(const LanePoint& o) const { return LanePoint{re + o.re, im + o.im}; }
  LanePoint operator-(const LanePoint& o) const { return LanePoint{re - o.re, im - o.im}; }
  /// times (wr + i wi), the same for every lane
  LanePoint times(Scalar wr, Scalar wi) const {
    const V r(wr), i(wi);
    return LanePoint{Ops::mul_sub(re, r, im * i), Ops::mul_add(re, i, im * r)};
  }
  /// times (wr - i wi)
  LanePoint times_conjugate(Scalar wr, Scalar wi) const {
    const V r(wr), i(wi);
    return LanePoint{Ops::mul_add(re, r, im * i), Ops::mul_sub(im, r, re * i)};
  }
};

/// Points per sub-transform run pass by pass: 256 KiB of data, inside L2.
template <class V>
constexpr index_t kInCachePoints = index_t(256 * 1024) / index_t(2 * sizeof(V));

/// One decimation-in-frequency pass over the `size` points at x: for k < size / 2,
/// (a, b) -> (a + b, (a - b) w^(k L / size)).
template <class V>
void dif_pass(typename LaneOps<V>::Scalar* x, index_t size, const FftTwiddles<typename LaneOps<V>::Scalar>& w) {
  constexpr index_t kL = LaneOps<V>::kLanes;
  const index_t half = size / 2, step = w.length() / size;
  for (index_t k = 0; k < half; ++k) {
    auto* top = x + 2 * kL * k;
    auto* bottom = x + 2 * kL * (k + half);
    const LanePoint<V> a = LanePoint<V>::load(top), b = LanePoint<V>::load(bottom);
    (a + b).store(top);
    const LanePoint<V> d = a - b;
    (k == 0 ? d : d.times(w.re(k * step), w.im(k * step))).store(bottom);
  }
}

/// One decimation-in-time pass of the inverse transform over the `size` points at x:
/// (a, b) -> (a + b conj(w), a - b conj(w)), w = w^(k L / size).
template <class V>
void dit_inverse_pass(typename LaneOps<V>::Scalar* x, index_t size, const FftTwiddles<typename LaneOps<V>::Scalar>& w) {
  constexpr index_t kL = LaneOps<V>::kLanes;
  const index_t half = size / 2, step = w.length() / size;
  for (index_t k = 0; k < half; ++k) {
    auto* top = x + 2 * kL * k;
    auto* bottom = x + 2 * kL * (k + half);
    const LanePoint<V> a = LanePoint<V>::load(top);
    LanePoint<V> b = LanePoint<V>::load(bottom);
    if (k != 0) b = b.times_conjugate(w.re(k * step), w.im(k * step));
    (a + b).store(top);
    (a - b).store(bottom);
  }
}

template <class V>
void forward_recursive(typename LaneOps<V>::Scalar* x, index_t size, const FftTwiddles<typename LaneOps<V>::Scalar>& w) {
  if (size <= kInCachePoints<V>) {
    for (index_t span = size; span >= 2; span /= 2) {
      for (index_t begin = 0; begin < size; begin += span) dif_pass<V>(x + 2 * LaneOps<V>::kLanes * begin, span, w);
    }
    return;
  }
  dif_pass<V>(x, size, w);
  forward_recursive<V>(x, size / 2, w);
  forward_recursive<V>(x + LaneOps<V>::kLanes * size, size / 2, w);
}

template <class V>
void inverse_recursive(typename LaneOps<V>::Scalar* x, index_t size, const FftTwiddles<typename LaneOps<V>::Scalar>& w) {
  if (size <= kInCachePoints<V>) {
    for (index_t span = 2; span <= size; span *= 2) {
      for (index_t begin = 0; begin < size; begin += span) dit_inverse_pass<V>(x + 2 * LaneOps<V>::kLanes * begin, span, w);
    }
    return;
  }
  inverse_recursive<V>(x, size / 2, w);
  inverse_recursive<V>(x + LaneOps<V>::kLanes * size, size / 2, w);
  dit_inverse_pass<V>(x, size, w);
}

}  // namespace detail

/// Lanes of one batch: kWidth<T> sequences per transform (V = Batch<T>), or 1 (V = T).
template <class V>
inline constexpr index_t kFftLanes = detail::LaneOps<V>::kLanes;

/// In place: the DFT X[f] = sum_p x[p] w^(p f) of every lane's sequence of w.length() points,
/// the result in bit-reversed order of f. V is Batch<T> (kWidth<T> lanes, data aligned to
/// the batch) or T (one lane).
template <class V>
void fft_forward_bit_reversed(typename detail::LaneOps<V>::Scalar* data, const FftTwiddles<typename detail::LaneOps<V>::Scalar>& w) {
  detail::forward_recursive<V>(data, w.length(), w);
}

/// In place: the inverse of fft_forward_bit_reversed times the length, x[p] = sum_f X[f]
/// w^(-p f), from a spectrum in bit-reversed order to points in natural order.
template <class V>
void fft_inverse_from_bit_reversed(typename detail::LaneOps<V>::Scalar* data,
                                   const FftTwiddles<typename detail::LaneOps<V>::Scalar>& w) {
  detail::inverse_recursive<V>(data, w.length(), w);
}

/// data[f] *= spectrum[f] for every lane: spectrum is [L x 2] (re, im) scalars shared by all
/// lanes, in the same (bit-reversed) order as the data.
template <class V>
void multiply_spectrum(typename detail::LaneOps<V>::Scalar* data, const typename detail::LaneOps<V>::Scalar* spectrum,
                       index_t length) {
  constexpr index_t kL = detail::LaneOps<V>::kLanes;
  for (index_t f = 0; f < length; ++f) {
    auto* point = data + 2 * kL * f;
    detail::LanePoint<V>::load(point).times(spectrum[2 * f], spectrum[2 * f + 1]).store(point);
  }
}

}  // namespace attnkit::simd
