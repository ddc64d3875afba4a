// simd::exp2 against its documented accuracy (about 1.5 ulp for float, 2 for double, over the
// normal range) and its edge behaviour, which the online softmax relies on: -inf and
// everything below the range give +0, large inputs saturate finitely, NaN stays NaN.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attnkit/simd/exp2.hpp"

namespace attnkit::testing {
namespace {

/// 2^x of each element through the vector kernel (the tail padded with zeros).
template <class T>
std::vector<T> vector_exp2(const std::vector<T>& x) {
  constexpr std::size_t kW = simd::kWidth<T>;
  std::vector<T> padded(x), out(x.size() + kW);
  padded.resize((x.size() + kW - 1) / kW * kW, T(0));
  out.resize(padded.size());
  for (std::size_t i = 0; i < padded.size(); i += kW) {
    simd::exp2(simd::Batch<T>::load_unaligned(padded.data() + i)).store_unaligned(out.data() + i);
  }
  out.resize(x.size());
  return out;
}

/// Worst |2^x - exact| / exact over `count` points spread over [lo, hi], in units of the
/// relative spacing 2^-(mantissa bits) (one ulp of a value in [1, 2)).
template <class T>
double worst_relative_error_in_ulps(double lo, double hi, int count) {
  std::vector<T> x(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) x[static_cast<std::size_t>(i)] = static_cast<T>(lo + (hi - lo) * i / (count - 1));
  const std::vector<T> y = vector_exp2(x);
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const long double exact = std::exp2(static_cast<long double>(x[i]));
    worst = std::max(worst, static_cast<double>(std::fabs((static_cast<long double>(y[i]) - exact) / exact)));
  }
  return worst / std::numeric_limits<T>::epsilon();
}

TEST(Exp2, FloatWithinTwoUlpsOverTheNormalRange) {
  EXPECT_LE(worst_relative_error_in_ulps<float>(-126.0, 127.0, 2'000'003), 2.0);
  EXPECT_LE(worst_relative_error_in_ulps<float>(-0.5, 0.5, 1'000'001), 2.0);  // the polynomial's own interval
}

TEST(Exp2, DoubleWithinTwoUlpsOverTheNormalRange) {
  EXPECT_LE(worst_relative_error_in_ulps<double>(-1022.0, 1023.0, 1'000'003), 2.0);
}

template <class T>
void expect_edges() {
  constexpr T inf = std::numeric_limits<T>::infinity();
  const std::vector<T> x{-inf, T(-2000), T(0), T(1), T(-1), T(2000), inf, std::numeric_limits<T>::quiet_NaN()};
  const std::vector<T> y = vector_exp2(x);
  EXPECT_EQ(y[0], T(0));
  EXPECT_FALSE(std::signbit(y[0]));
  EXPECT_EQ(y[1], T(0));
  EXPECT_EQ(y[2], T(1));
  EXPECT_EQ(y[3], T(2));
  EXPECT_EQ(y[4], T(0.5));
  EXPECT_TRUE(std::isfinite(y[5]));
  EXPECT_GT(y[5], T(1e30));
  EXPECT_TRUE(std::isfinite(y[6]));
  EXPECT_TRUE(std::isnan(y[7]));
}

TEST(Exp2, EdgesFloat) { expect_edges<float>(); }
TEST(Exp2, EdgesDouble) { expect_edges<double>(); }

}  // namespace
}  // namespace attnkit::testing
