// The lane-batched FFT (simd/lane_fft.hpp) and the circulant Toeplitz product
// (kernel/toeplitz_fft.hpp) against naive O(L^2) sums in double.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <vector>

#include "attnkit/detail/aligned_buffer.hpp"
#include "attnkit/kernel/toeplitz_fft.hpp"
#include "attnkit/simd/lane_fft.hpp"
#include "support/test_data.hpp"

namespace attnkit {
namespace {

index_t bit_reversed(index_t f, index_t length) {
  index_t r = 0;
  for (index_t bit = 1; bit < length; bit <<= 1) r = (r << 1) | ((f & bit) != 0 ? 1 : 0);
  return r;
}

/// Forward DFT of every lane in bit-reversed order, then the inverse: both against the
/// naive DFT (relative to the spectrum's size, as an FFT's error is), over lengths that
/// take the in-cache passes (an odd and an even number of levels) and the recursive split
/// (above kInCachePoints: 128 points for AVX-512 floats, 512 for SSE2).
template <class T>
void check_forward_and_inverse(index_t length) {
  constexpr index_t kLanes = simd::kFftLanes<simd::Batch<T>>;
  const simd::FftTwiddles<T> twiddles(length);
  detail::AlignedBuffer<T> data(2 * kLanes * length);
  std::vector<std::complex<double>> input(static_cast<std::size_t>(kLanes * length));
  for (index_t p = 0; p < length; ++p)
    for (index_t lane = 0; lane < kLanes; ++lane) {
      const std::complex<double> x(testing::normal_sample(1, 1, static_cast<std::uint64_t>(p * kLanes + lane)),
                                   testing::normal_sample(1, 2, static_cast<std::uint64_t>(p * kLanes + lane)));
      input[static_cast<std::size_t>(lane * length + p)] = x;
      data.data()[2 * kLanes * p + lane] = static_cast<T>(x.real());
      data.data()[2 * kLanes * p + kLanes + lane] = static_cast<T>(x.imag());
    }
  simd::fft_forward_bit_reversed<simd::Batch<T>>(data.data(), twiddles);
  const double eps = std::numeric_limits<T>::epsilon();
  const double bound = 8 * eps * std::log2(static_cast<double>(length)) * std::sqrt(static_cast<double>(length)) * 2;
  for (index_t lane = 0; lane<kLanes; lane += kLanes> 1 ? kLanes - 1 : 1) {  // the first and last lane
    for (index_t f = 0; f < length; f += std::max<index_t>(1, length / 64)) {
      std::complex<double> expected = 0;
      for (index_t p = 0; p < length; ++p) {
        const double angle = -2 * M_PI * static_cast<double>((p * f) % length) / static_cast<double>(length);
        expected += input[static_cast<std::size_t>(lane * length + p)] * std::polar(1.0, angle);
      }
      const index_t slot = bit_reversed(f, length);
      const std::complex<double> got(data.data()[2 * kLanes * slot + lane],
                                     data.data()[2 * kLanes * slot + kLanes + lane]);
      EXPECT_LE(std::abs(got - expected), bound) << "L " << length << " lane " << lane << " f " << f;
    }
  }
  simd::fft_inverse_from_bit_reversed<simd::Batch<T>>(data.data(), twiddles);
  for (index_t p = 0; p < length; ++p)
    for (index_t lane = 0; lane < kLanes; ++lane) {
      const std::complex<double> got(data.data()[2 * kLanes * p + lane], data.data()[2 * kLanes * p + kLanes + lane]);
      const std::complex<double> expected =
          input[static_cast<std::size_t>(lane * length + p)] * static_cast<double>(length);
      ASSERT_LE(std::abs(got - expected), bound * static_cast<double>(length) / std::sqrt(static_cast<double>(length)))
          << "L " << length << " p " << p;
    }
}

TEST(LaneFft, FloatMatchesNaiveDft) {
  for (index_t length : {2, 4, 8, 64, 1024, 4096, 8192, 32768}) check_forward_and_inverse<float>(length);
}
TEST(LaneFft, DoubleMatchesNaiveDft) {
  for (index_t length : {2, 16, 512, 8192, 32768}) check_forward_and_inverse<double>(length);
}

/// radix8_pass (AVX-512's sweep) runs the butterflies of radix4_pass over the block and then
/// the span-size/4 level of each quarter, in that order per point: the same bits, forward and
/// inverse, for the vector and the scalar lanes.
template <class V>
void check_radix8_equals_radix4_then_radix2() {
  using Scalar = typename simd::detail::LaneOps<V>::Scalar;
  using Point = simd::detail::LanePoint<V>;
  constexpr index_t kL = simd::kFftLanes<V>, kSize = 64, kEighth = kSize / 8, kQuarter = kSize / 4;
  const simd::FftTwiddles<Scalar> twiddles(kSize);
  detail::AlignedBuffer<Scalar> eight(2 * kL * kSize), four(2 * kL * kSize);
  const auto at = [](detail::AlignedBuffer<Scalar>& x, index_t p) { return x.data() + 2 * kL * p; };
  for (bool forward : {true, false}) {
    for (index_t e = 0; e < 2 * kL * kSize; ++e)
      eight.data()[e] = four.data()[e] =
          static_cast<Scalar>(testing::normal_sample(11, forward, static_cast<std::uint64_t>(e)));
    const auto quarter_level = [&] {
      for (index_t q = 0; q < 4; ++q)
        for (index_t k = 0; k < kEighth; ++k) {
          Point a = Point::load(at(four, q * kQuarter + k)), b = Point::load(at(four, q * kQuarter + k + kEighth));
          if (forward) {
            simd::detail::dif<V>(a, b, twiddles.span(kQuarter), k);
          } else {
            simd::detail::dit_inverse<V>(a, b, twiddles.span(kQuarter), k);
          }
          a.store(at(four, q * kQuarter + k));
          b.store(at(four, q * kQuarter + k + kEighth));
        }
    };
    if (forward) {
      simd::detail::radix8_pass<V, true>(kSize, twiddles, simd::detail::point_loads<V>(eight.data()),
                                         simd::detail::point_stores<V>(eight.data()));
      simd::detail::radix4_pass<V, true>(four.data(), kSize, twiddles);
      quarter_level();
    } else {
      simd::detail::radix8_pass<V, false>(kSize, twiddles, simd::detail::point_loads<V>(eight.data()),
                                          simd::detail::point_stores<V>(eight.data()));
      quarter_level();
      simd::detail::radix4_pass<V, false>(four.data(), kSize, twiddles);
    }
    EXPECT_TRUE(std::equal(eight.data(), eight.data() + 2 * kL * kSize, four.data())) << "forward " << forward;
  }
}
TEST(LaneFft, RadixEightSweepEqualsRadixFourThenTwo) {
  check_radix8_equals_radix4_then_radix2<simd::Batch<float>>();
  check_radix8_equals_radix4_then_radix2<double>();
}

/// A ToeplitzBatch product y_i = sum_j c(j - i - (Lk - Lq)) x_j against the sum itself, for
/// Lq = Lk, Lq < Lk and Lq > Lk, with a one-sided (causal) coefficient table, in cache and
/// through the recursive split (L = 8192 and 32768; every row up to 100, then a sample).
TEST(ToeplitzBatch, MatchesDirectSums) {
  using T = float;
  constexpr index_t kColumns = kernel::ToeplitzBatch<T>::kColumns;
  for (const auto& [lq, lk] :
       {std::pair<index_t, index_t>{37, 37}, {5, 70}, {90, 3}, {1, 1}, {3000, 5000}, {9000, 9000}}) {
    for (bool causal : {false, true}) {
      const auto c = [&](index_t t) {
        return causal && t > 0 ? 0.0 : std::exp(-0.05 * std::abs(static_cast<double>(t)) + 0.01 * t);
      };
      const index_t length = kernel::circulant_length(lq, lk);
      const simd::FftTwiddles<double> spectrum_twiddles(length);
      const simd::FftTwiddles<T> twiddles(length);
      std::vector<double> scratch(static_cast<std::size_t>(2 * length));
      std::vector<T> spectrum(static_cast<std::size_t>(2 * length));
      kernel::circulant_spectrum<T>(lq, lk, c, spectrum_twiddles, scratch.data(), spectrum.data());
      detail::AlignedBuffer<T> data(2 * simd::kWidth<T> * length);
      const kernel::ToeplitzBatch<T> batch(data.data(), kernel::LaneFftEngine<T>(twiddles));
      std::vector<double> x(static_cast<std::size_t>(lk * kColumns));
      for (index_t j = 0; j < lk; ++j)
        for (index_t col = 0; col < kColumns; ++col) {
          x[static_cast<std::size_t>(j * kColumns + col)] =
              testing::normal_sample(7, 1, static_cast<std::uint64_t>(j * kColumns + col));
          batch.point(j)[col] = static_cast<T>(x[static_cast<std::size_t>(j * kColumns + col)]);
        }
      batch.transform(spectrum.data(), lk, lq);
      for (index_t i = 0; i < lq; i += std::max<index_t>(1, lq / 97))
        for (index_t col = 0; col < kColumns; ++col) {
          double expected = 0, size = 0;
          for (index_t j = 0; j < lk; ++j) {
            const double term = c(j - i - (lk - lq)) * x[static_cast<std::size_t>(j * kColumns + col)];
            expected += term;
            size += std::abs(term);
          }
          EXPECT_NEAR(batch.point(i)[col], expected, 1e-5 * (1 + size)) << lq << " x " << lk << " causal " << causal;
        }
    }
  }
}

/// The streamed product (inputs from a source, outputs to a sink, simd::fft_convolve's fused
/// ends) equals the in-place one bit for bit, and reads exactly the points j < Lk and writes
/// exactly the rows i < Lq, once each.
TEST(ToeplitzBatch, StreamedEqualsInPlace) {
  using T = float;
  using Batch = simd::Batch<T>;
  constexpr index_t kW = static_cast<index_t>(simd::kWidth<T>);
  for (const auto& [lq, lk] : {std::pair<index_t, index_t>{3, 2}, {700, 900}, {6000, 6000}}) {
    const index_t length = kernel::circulant_length(lq, lk);
    const simd::FftTwiddles<double> spectrum_twiddles(length);
    const simd::FftTwiddles<T> twiddles(length);
    std::vector<double> scratch(static_cast<std::size_t>(2 * length));
    std::vector<T> spectrum(static_cast<std::size_t>(2 * length));
    kernel::circulant_spectrum<T>(
        lq, lk, [](index_t t) { return std::exp(-0.002 * std::abs(static_cast<double>(t))); }, spectrum_twiddles,
        scratch.data(), spectrum.data());
    const index_t columns = kernel::ToeplitzBatch<T>::kColumns;
    detail::AlignedBuffer<T> x(columns * lk), in_place(2 * kW * length), streamed(2 * kW * length);
    for (index_t e = 0; e < columns * lk; ++e)
      x.data()[e] = static_cast<T>(testing::normal_sample(9, 1, static_cast<std::uint64_t>(e)));
    const kernel::ToeplitzBatch<T> a(in_place.data(), kernel::LaneFftEngine<T>(twiddles)),
        b(streamed.data(), kernel::LaneFftEngine<T>(twiddles));
    std::copy(x.data(), x.data() + columns * lk, a.point(0));
    a.transform(spectrum.data(), lk, lq);
    std::vector<int> reads(static_cast<std::size_t>(lk)), writes(static_cast<std::size_t>(lq));
    std::vector<T> out(static_cast<std::size_t>(columns * lq));
    b.transform(
        spectrum.data(), lk,
        [&](index_t j) {
          ++reads[static_cast<std::size_t>(j)];
          const T* p = x.data() + columns * j;
          return kernel::ToeplitzBatch<T>::Point{Batch::load_aligned(p), Batch::load_aligned(p + kW)};
        },
        lq,
        [&](index_t i, const kernel::ToeplitzBatch<T>::Point& y) {
          ++writes[static_cast<std::size_t>(i)];
          y.re.store_unaligned(out.data() + columns * i);
          y.im.store_unaligned(out.data() + columns * i + kW);
        });
    EXPECT_EQ(std::count(reads.begin(), reads.end(), 1), lk) << lq << " x " << lk;
    EXPECT_EQ(std::count(writes.begin(), writes.end(), 1), lq) << lq << " x " << lk;
    EXPECT_TRUE(std::equal(out.begin(), out.end(), a.point(0))) << lq << " x " << lk;
  }
}

}  // namespace
}  // namespace attnkit
