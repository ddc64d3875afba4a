#pragma once
// kernel::EigenFftEngine: ToeplitzBatch's convolutions by Eigen's FFT module
// (unsupported/Eigen/FFT, MPL2 with its default kissfft backend), one lane at a time.

#include <complex>
#include <vector>

#include <unsupported/Eigen/FFT>

#include "attnkit/core/index.hpp"
#include "attnkit/kernel/toeplitz_fft.hpp"
#include "attnkit/simd/batch.hpp"

namespace attnkit::kernel {

/// The permissive library backend of KernelizedRpe (RpeFft::kEigen): for each of the W lanes
/// of a batch, the lane's complex sequence is copied out, transformed by Eigen::FFT (forward,
/// times the natural-order spectrum, inverse unscaled: the spectrum carries 1 / L) and copied
/// back. Eigen::FFT caches its plans in the object and is not safe to share between threads,
/// so each thread keeps its own.
template <class T>
class EigenFftEngine {
 public:
  static constexpr bool kBitReversedSpectrum = false;
  explicit EigenFftEngine(index_t length) : length_(length) {}
  index_t length() const { return length_; }

  template <class Source, class Sink>
  void convolve(T* data, const T* spectrum, index_t inputs, Source&& source, index_t outputs, Sink&& sink) const {
    buffered_convolve(data, length_, inputs, source, outputs, sink, [&] { convolve_lanes(data, spectrum); });
  }

 private:
  static constexpr index_t kW = static_cast<index_t>(simd::kWidth<T>);
  using Complex = std::complex<T>;

  static Eigen::FFT<T>& thread_fft() {
    thread_local Eigen::FFT<T> fft = [] {
      Eigen::FFT<T> f;
      f.SetFlag(Eigen::FFT<T>::Unscaled);
      return f;
    }();
    return fft;
  }

  void convolve_lanes(T* data, const T* spectrum) const {
    thread_local std::vector<Complex> sequence_buffer, frequency_buffer;
    sequence_buffer.resize(static_cast<std::size_t>(length_));
    frequency_buffer.resize(static_cast<std::size_t>(length_));
    Complex* sequence = sequence_buffer.data();
    Complex* frequencies = frequency_buffer.data();
    Eigen::FFT<T>& fft = thread_fft();
    for (index_t lane = 0; lane < kW; ++lane) {
      for (index_t p = 0; p < length_; ++p)
        sequence[p] = Complex(data[2 * kW * p + lane], data[2 * kW * p + kW + lane]);
      fft.fwd(frequencies, sequence, length_);
      for (index_t f = 0; f < length_; ++f) frequencies[f] *= Complex(spectrum[2 * f], spectrum[2 * f + 1]);
      fft.inv(sequence, frequencies, length_);
      for (index_t p = 0; p < length_; ++p) {
        data[2 * kW * p + lane] = sequence[p].real();
        data[2 * kW * p + kW + lane] = sequence[p].imag();
      }
    }
  }

  index_t length_;
};

}  // namespace attnkit::kernel
