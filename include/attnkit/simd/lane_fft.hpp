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
// bit-reversal permutation. Both run two or three radix-2 passes per sweep (radix4_pass,
// radix8_pass) and recurse depth-first until a sub-transform fits in L1.

#include <cmath>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"

namespace attnkit::simd {

/// The twiddles of every pass of a transform of length L (a power of two >= 2): for each
/// span s = 2, 4, ..., L, w_s^k = exp(-2 pi i k / s) for k < s / 2 as (re, im) pairs, computed
/// in double. A pass of span s reads only its own s / 2 contiguous pairs, not every (L / s)-th
/// entry of one length-L table, which at L = 2^17 touched a cache line per twiddle.
template <class T>
class FftTwiddles {
 public:
  explicit FftTwiddles(index_t length) : length_(length), table_(static_cast<std::size_t>(2 * (length - 1))) {
    constexpr double kTwoPi = 6.283185307179586476925286766559;
    for (index_t span = 2; span <= length; span *= 2) {
      T* pairs = table_.data() + 2 * (span / 2 - 1);
      for (index_t k = 0; k < span / 2; ++k) {
        const double angle = -kTwoPi * static_cast<double>(k) / static_cast<double>(span);
        pairs[2 * k] = static_cast<T>(std::cos(angle));
        pairs[2 * k + 1] = static_cast<T>(std::sin(angle));
      }
    }
  }
  index_t length() const { return length_; }
  /// w_s^k at [2 k] (re) and [2 k + 1] (im), k < s / 2.
  const T* span(index_t s) const { return table_.data() + 2 * (s / 2 - 1); }

 private:
  index_t length_;
  std::vector<T> table_;  // span s at 2 (s / 2 - 1)
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
  /// times w (a (re, im) pair), the same for every lane
  LanePoint times(const Scalar* w) const {
    const V r(w[0]), i(w[1]);
    return LanePoint{Ops::mul_sub(re, r, im * i), Ops::mul_add(re, i, im * r)};
  }
  /// times conj(w)
  LanePoint times_conjugate(const Scalar* w) const {
    const V r(w[0]), i(w[1]);
    return LanePoint{Ops::mul_add(re, r, im * i), Ops::mul_sub(im, r, re * i)};
  }
};

/// The Load and Store of a pass over the contiguous points at x: point p at x + 2 kLanes p.
template <class V>
auto point_loads(typename LaneOps<V>::Scalar* x) {
  return [x](index_t p) { return LanePoint<V>::load(x + 2 * LaneOps<V>::kLanes * p); };
}
template <class V>
auto point_stores(typename LaneOps<V>::Scalar* x) {
  return [x](index_t p, const LanePoint<V>& point) { point.store(x + 2 * LaneOps<V>::kLanes * p); };
}

/// Points per sub-transform run pass by pass: 16 KiB of data, inside L1 with its twiddles and
/// spectrum on every x86 core (32 KiB or more). Above it every sweep splits a block in
/// kSweepRadix parts; the in-cache passes are bound by loads and stores, so they pay where L1
/// serves them.
template <class V>
constexpr index_t kInCachePoints = index_t(16 * 1024) / index_t(2 * sizeof(V));

/// The forward (decimation-in-frequency) butterfly: (a, b) -> (a + b, (a - b) w); k = 0 means
/// w = 1, and skips the product.
template <class V>
void dif(LanePoint<V>& a, LanePoint<V>& b, const typename LaneOps<V>::Scalar* w, index_t k) {
  const LanePoint<V> d = a - b;
  a = a + b;
  b = k == 0 ? d : d.times(w + 2 * k);
}

/// The inverse (decimation-in-time) butterfly: (a, b) -> (a + b conj(w), a - b conj(w)).
template <class V>
void dit_inverse(LanePoint<V>& a, LanePoint<V>& b, const typename LaneOps<V>::Scalar* w, index_t k) {
  const LanePoint<V> t = k == 0 ? b : b.times_conjugate(w + 2 * k);
  b = a - t;
  a = a + t;
}

/// Two passes at once over the `size` points of one block (spans size and size / 2): for
/// k < size / 4 the points k + j size / 4, j < 4, go through their four radix-2 butterflies in
/// registers, half the loads and stores of two radix-2 passes (which the in-cache passes are
/// bound by) and the same arithmetic, so the same result. Forward: span size, then size / 2;
/// inverse: the reverse. load(p) gives point p of the block, store(p, point) takes it back.
template <class V, bool kForward, class Load, class Store>
void radix4_pass(index_t size, const FftTwiddles<typename LaneOps<V>::Scalar>& w, Load&& load, Store&& store) {
  const index_t quarter = size / 4;
  const auto* outer = w.span(size);
  const auto* inner = w.span(size / 2);
  for (index_t k = 0; k < quarter; ++k) {
    LanePoint<V> a0 = load(k), a1 = load(k + quarter), a2 = load(k + 2 * quarter), a3 = load(k + 3 * quarter);
    if constexpr (kForward) {
      dif<V>(a0, a2, outer, k);
      dif<V>(a1, a3, outer, k + quarter);
      dif<V>(a0, a1, inner, k);
      dif<V>(a2, a3, inner, k);
    } else {
      dit_inverse<V>(a0, a1, inner, k);
      dit_inverse<V>(a2, a3, inner, k);
      dit_inverse<V>(a0, a2, outer, k);
      dit_inverse<V>(a1, a3, outer, k + quarter);
    }
    store(k, a0);
    store(k + quarter, a1);
    store(k + 2 * quarter, a2);
    store(k + 3 * quarter, a3);
  }
}

/// Three passes at once over the `size` points of one block (spans size, size / 2, size / 4):
/// for k < size / 8 the points k + j size / 8, j < 8, through their twelve radix-2
/// butterflies in registers: a third fewer sweeps over blocks out of L1 than radix4_pass, the
/// same butterflies in the same order per point, so the same result. Sixteen vectors of
/// points: for targets with 32 vector registers (kSweepRadix).
template <class V, bool kForward, class Load, class Store>
void radix8_pass(index_t size, const FftTwiddles<typename LaneOps<V>::Scalar>& w, Load&& load, Store&& store) {
  const index_t e = size / 8;
  const auto *whole = w.span(size), *half = w.span(size / 2), *quarter = w.span(size / 4);
  for (index_t k = 0; k < e; ++k) {
    LanePoint<V> a0 = load(k), a1 = load(k + e), a2 = load(k + 2 * e), a3 = load(k + 3 * e);
    LanePoint<V> a4 = load(k + 4 * e), a5 = load(k + 5 * e), a6 = load(k + 6 * e), a7 = load(k + 7 * e);
    if constexpr (kForward) {
      dif<V>(a0, a4, whole, k), dif<V>(a1, a5, whole, k + e), dif<V>(a2, a6, whole, k + 2 * e),
          dif<V>(a3, a7, whole, k + 3 * e);
      dif<V>(a0, a2, half, k), dif<V>(a1, a3, half, k + e), dif<V>(a4, a6, half, k), dif<V>(a5, a7, half, k + e);
      dif<V>(a0, a1, quarter, k), dif<V>(a2, a3, quarter, k), dif<V>(a4, a5, quarter, k), dif<V>(a6, a7, quarter, k);
    } else {
      dit_inverse<V>(a0, a1, quarter, k), dit_inverse<V>(a2, a3, quarter, k);
      dit_inverse<V>(a4, a5, quarter, k), dit_inverse<V>(a6, a7, quarter, k);
      dit_inverse<V>(a0, a2, half, k), dit_inverse<V>(a1, a3, half, k + e);
      dit_inverse<V>(a4, a6, half, k), dit_inverse<V>(a5, a7, half, k + e);
      dit_inverse<V>(a0, a4, whole, k), dit_inverse<V>(a1, a5, whole, k + e);
      dit_inverse<V>(a2, a6, whole, k + 2 * e), dit_inverse<V>(a3, a7, whole, k + 3 * e);
    }
    store(k, a0), store(k + e, a1), store(k + 2 * e, a2), store(k + 3 * e, a3);
    store(k + 4 * e, a4), store(k + 5 * e, a5), store(k + 6 * e, a6), store(k + 7 * e, a7);
  }
}

/// Points per sweep over a block larger than the leaves: 8 (radix8_pass) where eight points
/// and their twiddles fit in the registers (AVX-512's 32), else 4 (radix4_pass; eight points
/// spill on 16 registers: 0.84-0.93x at n <= 4096 with AVX2).
template <class V>
inline constexpr index_t kSweepRadix = 4;
template <class S>
inline constexpr index_t kSweepRadix<Batch<S>> = kVectorRegisters<S> >= 32 ? 8 : 4;

/// The parts a sweep splits a block of `size` points into: kSweepRadix<V>, or 4 where
/// size < 8.
template <class V>
index_t sweep_radix(index_t size) {
  return kSweepRadix<V> == 8 && size >= 8 ? 8 : 4;
}

/// The sweep_radix(size) pass over the `size` points of a block (load and store as
/// radix4_pass).
template <class V, bool kForward, class Load, class Store>
void sweep_pass(index_t size, const FftTwiddles<typename LaneOps<V>::Scalar>& w, Load&& load, Store&& store) {
  if (sweep_radix<V>(size) == 8) {
    radix8_pass<V, kForward>(size, w, load, store);
  } else {
    radix4_pass<V, kForward>(size, w, load, store);
  }
}

/// sweep_pass in place on the `size` contiguous points at x.
template <class V, bool kForward>
void sweep_pass(typename LaneOps<V>::Scalar* x, index_t size, const FftTwiddles<typename LaneOps<V>::Scalar>& w) {
  sweep_pass<V, kForward>(size, w, point_loads<V>(x), point_stores<V>(x));
}

/// radix4_pass in place on the `size` contiguous points at x.
template <class V, bool kForward>
void radix4_pass(typename LaneOps<V>::Scalar* x, index_t size, const FftTwiddles<typename LaneOps<V>::Scalar>& w) {
  radix4_pass<V, kForward>(size, w, point_loads<V>(x), point_stores<V>(x));
}

/// The pass of span 2 over `size` points: sums and differences of neighbours (w = 1).
template <class V, bool kForward>
void radix2_neighbours(typename LaneOps<V>::Scalar* x, index_t size) {
  constexpr index_t kL = LaneOps<V>::kLanes;
  for (index_t p = 0; p < size; p += 2) {
    auto* point = x + 2 * kL * p;
    LanePoint<V> a = LanePoint<V>::load(point), b = LanePoint<V>::load(point + 2 * kL);
    if constexpr (kForward) {
      dif<V>(a, b, nullptr, 0);
    } else {
      dit_inverse<V>(a, b, nullptr, 0);
    }
    a.store(point);
    b.store(point + 2 * kL);
  }
}

/// Every pass of a transform of `size` points held in cache, two at a time: the forward
/// spans size, size / 2, ..., and a last span-2 pass when log2(size) is odd; the inverse the
/// same in the opposite order.
template <class V, bool kForward>
void in_cache_passes(typename LaneOps<V>::Scalar* x, index_t size, const FftTwiddles<typename LaneOps<V>::Scalar>& w) {
  constexpr index_t kL = LaneOps<V>::kLanes;
  index_t levels = 0;
  while ((index_t(1) << levels) < size) ++levels;
  const bool odd_levels = levels % 2 == 1;
  if (!kForward && odd_levels) radix2_neighbours<V, false>(x, size);
  if constexpr (kForward) {
    for (index_t span = size; span >= 4; span /= 4)
      for (index_t begin = 0; begin < size; begin += span) radix4_pass<V, true>(x + 2 * kL * begin, span, w);
  } else {
    for (index_t span = odd_levels ? 8 : 4; span <= size; span *= 4)
      for (index_t begin = 0; begin < size; begin += span) radix4_pass<V, false>(x + 2 * kL * begin, span, w);
  }
  if (kForward && odd_levels) radix2_neighbours<V, true>(x, size);
}

/// Depth first: transforms larger than kInCachePoints run their widest passes over the whole
/// (sweep_pass), then recurse into the parts, which the forward transform leaves independent
/// and the inverse takes as independent.
template <class V, bool kForward>
void transform(typename LaneOps<V>::Scalar* x, index_t size, const FftTwiddles<typename LaneOps<V>::Scalar>& w) {
  if (size <= kInCachePoints<V>) {
    in_cache_passes<V, kForward>(x, size, w);
    return;
  }
  constexpr index_t kL = LaneOps<V>::kLanes;
  const index_t parts = sweep_radix<V>(size), part = size / parts;
  if constexpr (kForward) sweep_pass<V, true>(x, size, w);
  for (index_t j = 0; j < parts; ++j) transform<V, kForward>(x + 2 * kL * j * part, part, w);
  if constexpr (!kForward) sweep_pass<V, false>(x, size, w);
}

/// data[f] *= spectrum[f] for the `size` points at data (spectrum: (re, im) pairs).
template <class V>
void multiply_spectrum(typename LaneOps<V>::Scalar* data, const typename LaneOps<V>::Scalar* spectrum, index_t size) {
  constexpr index_t kL = LaneOps<V>::kLanes;
  for (index_t f = 0; f < size; ++f) {
    auto* point = data + 2 * kL * f;
    LanePoint<V>::load(point).times(spectrum + 2 * f).store(point);
  }
}

/// The forward transform, the spectrum product and the inverse of the `size` points at x, a
/// block of the length-L transform below its widest passes: in cache, all three in turn
/// while the block stays there; larger, a sweep each way around the parts.
template <class V>
void convolve_block(typename LaneOps<V>::Scalar* x, index_t size, const typename LaneOps<V>::Scalar* spectrum,
                    const FftTwiddles<typename LaneOps<V>::Scalar>& w) {
  constexpr index_t kL = LaneOps<V>::kLanes;
  if (size <= kInCachePoints<V>) {
    in_cache_passes<V, true>(x, size, w);
    multiply_spectrum<V>(x, spectrum, size);
    in_cache_passes<V, false>(x, size, w);
    return;
  }
  const index_t parts = sweep_radix<V>(size), part = size / parts;
  sweep_pass<V, true>(x, size, w);
  for (index_t j = 0; j < parts; ++j) convolve_block<V>(x + 2 * kL * j * part, part, spectrum + 2 * j * part, w);
  sweep_pass<V, false>(x, size, w);
}

}  // namespace detail

/// Lanes of one batch: kWidth<T> sequences per transform (V = Batch<T>), or 1 (V = T).
template <class V>
inline constexpr index_t kFftLanes = detail::LaneOps<V>::kLanes;

/// One point of every lane (members re and im, each a V): what fft_convolve's source gives
/// and its sink takes.
template <class V>
using FftPoint = detail::LanePoint<V>;

/// In place: the DFT X[f] = sum_p x[p] w^(p f) of every lane's sequence of w.length() points,
/// the result in bit-reversed order of f. V is Batch<T> (kWidth<T> lanes, data aligned to
/// the batch) or T (one lane).
template <class V>
void fft_forward_bit_reversed(typename detail::LaneOps<V>::Scalar* data,
                              const FftTwiddles<typename detail::LaneOps<V>::Scalar>& w) {
  detail::transform<V, true>(data, w.length(), w);
}

/// In place: the inverse of fft_forward_bit_reversed times the length, x[p] = sum_f X[f]
/// w^(-p f), from a spectrum in bit-reversed order to points in natural order.
template <class V>
void fft_inverse_from_bit_reversed(typename detail::LaneOps<V>::Scalar* data,
                                   const FftTwiddles<typename detail::LaneOps<V>::Scalar>& w) {
  detail::transform<V, false>(data, w.length(), w);
}

/// The circular convolution of every lane's sequence with the one whose bit-reversed DFT
/// (times 1 / L) is `spectrum` ([L x 2] (re, im) scalars shared by all lanes), L =
/// w.length() >= 4: the same arithmetic as fft_forward_bit_reversed, the product and
/// fft_inverse_from_bit_reversed, depth first: every block transformed, multiplied and
/// transformed back while it is in cache (L2 from 1 MiB down, L1 at the last 16 KiB), and
/// the ends fused into the widest sweep:
/// the input point p < inputs is source(p) (a LanePoint; later points are zero and never
/// read) and the output point p < outputs goes to sink(p, point) (later ones are dropped).
/// data: [L x 2 x kLanes] scratch, aligned.
template <class V, class Source, class Sink>
void fft_convolve(typename detail::LaneOps<V>::Scalar* data, const FftTwiddles<typename detail::LaneOps<V>::Scalar>& w,
                  const typename detail::LaneOps<V>::Scalar* spectrum, index_t inputs, Source&& source, index_t outputs,
                  Sink&& sink) {
  constexpr index_t kL = detail::LaneOps<V>::kLanes;
  using Point = detail::LanePoint<V>;
  const index_t size = w.length(), parts = detail::sweep_radix<V>(size), part = size / parts;
  detail::sweep_pass<V, true>(
      size, w,
      [&](index_t p) {
        return p < inputs ? Point(source(p)) : Point{V(0), V(0)};
      },
      detail::point_stores<V>(data));
  for (index_t j = 0; j < parts; ++j)
    detail::convolve_block<V>(data + 2 * kL * j * part, part, spectrum + 2 * j * part, w);
  detail::sweep_pass<V, false>(size, w, detail::point_loads<V>(data), [&](index_t p, const Point& point) {
    if (p < outputs) sink(p, point);
  });
}

}  // namespace attnkit::simd
