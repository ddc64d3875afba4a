#pragma once
// Toeplitz products by circulant embedding (SPEC.md section 9): y_i = sum_j c(j - i - delta)
// x_j for i < Lq, j < Lk, delta = Lk - Lq, on kWidth<T> pairs of real columns at once.

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/lane_fft.hpp"

namespace attnkit {

/// The FFT engine of KernelizedRpe's FFT path: kLanes, attnkit's batched transform (one
/// sequence per SIMD lane, simd/lane_fft.hpp, the default); kEigen, Eigen's FFT module
/// (unsupported/Eigen/FFT, kissfft); kFftw, FFTW3, only in builds with the CMake option
/// ATTNKIT_FFTW (GPL, off by default).
enum class RpeFft { kLanes, kEigen, kFftw };

}  // namespace attnkit

namespace attnkit::kernel {

/// The longest circulant KernelizedRpe's FFT path transforms: 2^30 points, so Lq + Lk - 1 <=
/// 2^30. FFTW and Eigen's kissfft take int lengths, and one transform's per-thread workspace
/// is already tens of GiB there (2 L (Dv + 1) values).
inline constexpr index_t kMaxCirculantLength = index_t{1} << 30;

/// Whether an Lq x Lk Toeplitz product fits a circulant of at most kMaxCirculantLength points.
constexpr bool fits_circulant(index_t q_len, index_t kv_len) {
  return q_len <= kMaxCirculantLength && kv_len <= kMaxCirculantLength && q_len + kv_len - 1 <= kMaxCirculantLength;
}

/// The smallest power of two >= Lq + Lk - 1 (and >= 4, simd::fft_convolve's least): the circulant that holds every
/// offset j - i of an Lq x Lk Toeplitz matrix without wrapping onto another. Throws attnkit::invalid_argument beyond
/// kMaxCirculantLength.
inline index_t circulant_length(index_t q_len, index_t kv_len) {
  if (!fits_circulant(q_len, kv_len)) {
    attnkit::detail::reject("Lq + Lk - 1",
                            q_len > kMaxCirculantLength || kv_len > kMaxCirculantLength
                                ? std::string("> 2^30")
                                : std::to_string(q_len + kv_len - 1),
                            "KernelizedRpe's FFT path needs Lq + Lk - 1 <= 2^30 (a circulant of at most 2^30 points); "
                            "use RpeAlgorithm::kDirect or kAuto, which sums directly beyond it");
  }
  index_t length = 4;
  while (length < q_len + kv_len - 1) length *= 2;
  return length;
}

/// Bit-reversed index of f < length (a power of two).
inline index_t bit_reversed_index(index_t f, index_t length) {
  index_t reversed = 0;
  for (index_t bit = 1; bit < length; bit <<= 1) reversed = (reversed << 1) | ((f & bit) != 0 ? 1 : 0);
  return reversed;
}

/// The circulant of one Toeplitz matrix and its spectrum. Generator g[s mod L] = c(-s - delta)
/// for s in [-(Lk - 1), Lq - 1], zero elsewhere, so (g * x)_i = sum_j c(j - i - delta) x_j;
/// its DFT is taken in double, divided by L (the inverse transform's factor) and stored as
/// [L x (re, im)], in the lane FFT's bit-reversed order or (natural_order) by frequency.
/// coefficient(t): c_t for offsets t in [-(Lk - 1), Lq - 1].
template <class T, class Coefficient>
void circulant_spectrum(index_t q_len, index_t kv_len, Coefficient&& coefficient,
                        const simd::FftTwiddles<double>& twiddles, double* scratch, T* spectrum,
                        bool natural_order = false) {
  const index_t length = twiddles.length(), shift = kv_len - q_len;
  std::fill(scratch, scratch + 2 * length, 0.0);
  for (index_t s = 0; s < q_len; ++s) scratch[2 * s] = coefficient(-s - shift);
  for (index_t s = 1; s < kv_len; ++s) scratch[2 * (length - s)] = coefficient(s - shift);
  simd::fft_forward_bit_reversed<double>(scratch, twiddles);
  const double inverse_length = 1.0 / static_cast<double>(length);
  for (index_t f = 0; f < length; ++f) {
    const index_t slot = natural_order ? bit_reversed_index(f, length) : f;
    spectrum[2 * f] = static_cast<T>(scratch[2 * slot] * inverse_length);
    spectrum[2 * f + 1] = static_cast<T>(scratch[2 * slot + 1] * inverse_length);
  }
}

/// The lane FFT (simd/lane_fft.hpp) as a ToeplitzBatch engine: every lane of a batch in one
/// transform, inputs and outputs streamed through its widest passes.
template <class T>
class LaneFftEngine {
 public:
  static constexpr bool kBitReversedSpectrum = true;
  explicit LaneFftEngine(const simd::FftTwiddles<T>& twiddles) : twiddles_(twiddles) {}
  index_t length() const { return twiddles_.length(); }
  template <class Source, class Sink>
  void convolve(T* data, const T* spectrum, index_t inputs, Source&& source, index_t outputs, Sink&& sink) const {
    simd::fft_convolve<simd::Batch<T>>(data, twiddles_, spectrum, inputs, source, outputs, sink);
  }

 private:
  const simd::FftTwiddles<T>& twiddles_;
};

/// For engines built on FFT libraries that transform arrays in place: point j of the
/// [L x 2 x W] batch at data becomes source(j) for j < inputs and zero beyond, convolve()
/// runs on the batch, then sink(i, point i) for i < outputs.
template <class T, class Source, class Sink, class Convolve>
void buffered_convolve(T* data, index_t length, index_t inputs, Source&& source, index_t outputs, Sink&& sink,
                       Convolve&& convolve) {
  using Point = simd::FftPoint<simd::Batch<T>>;
  constexpr index_t kW = static_cast<index_t>(simd::kWidth<T>);
  for (index_t j = 0; j < inputs; ++j) Point(source(j)).store(data + 2 * kW * j);
  std::fill(data + 2 * kW * inputs, data + 2 * kW * length, T(0));
  convolve();
  for (index_t i = 0; i < outputs; ++i) sink(i, Point::load(data + 2 * kW * i));
}

/// A batch of 2 kWidth<T> real columns of one Toeplitz product, packed as kWidth<T> complex
/// sequences (column c < W in the real parts of lane c, column W + c in the imaginary parts):
/// the spectrum is that of a real sequence, so one complex convolution carries two real ones
/// (its real and imaginary parts never mix). Engine runs the convolution: LaneFftEngine, or
/// EigenFftEngine / FftwEngine (kernel/eigen_fft_engine.hpp, kernel/fftw_engine.hpp), whose
/// spectra are in natural order (Engine::kBitReversedSpectrum false).
/// data: [L x 2 x W] elements, aligned: the transform's scratch.
template <class T, class Engine = LaneFftEngine<T>>
class ToeplitzBatch {
 public:
  static constexpr index_t kLanes = static_cast<index_t>(simd::kWidth<T>);
  static constexpr index_t kColumns = 2 * kLanes;
  using Point = simd::FftPoint<simd::Batch<T>>;

  ToeplitzBatch(T* data, Engine engine) : data_(data), engine_(std::move(engine)) {}

  /// The 2 W entries of point j: column c at point(j)[c] (c < W real parts, then imaginary).
  T* point(index_t j) const { return data_ + 2 * kLanes * j; }
  index_t length() const { return engine_.length(); }

  /// Streams every column x through its product with the Toeplitz matrix of `spectrum`
  /// (circulant_spectrum): x_j = source(j) for j < Lk (a Point), and sink(i, y_i) for i < Lq.
  template <class Source, class Sink>
  void transform(const T* spectrum, index_t kv_len, Source&& source, index_t q_len, Sink&& sink) const {
    engine_.convolve(data_, spectrum, kv_len, source, q_len, sink);
  }

  /// The same in place: x_j from point(j) for j < Lk, y_i to point(i) for i < Lq.
  void transform(const T* spectrum, index_t kv_len, index_t q_len) const {
    transform(
        spectrum, kv_len, [this](index_t j) { return Point::load(point(j)); }, q_len,
        [this](index_t i, const Point& y) { y.store(point(i)); });
  }

 private:
  T* data_;
  Engine engine_;
};

}  // namespace attnkit::kernel
