// Half precision: a Longformer layer's attention core on bfloat16 tensors viewed in place (as a
// PyTorch at::BFloat16 or Eigen::bfloat16 buffer would be), with a bfloat16 out and with a
// float out, and causal attention on float16 tensors (ggml_fp16_t / at::Half buffers). Prints
// each call's time next to the same call on float copies of the values, and the largest
// difference from the float64 reference on the same half values.
//
//   half_precision [n]   (n = 2048 by default)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <attnkit/attnkit.hpp>

namespace {

constexpr long kHeads = 8, kDim = 64;

/// Seconds of the fastest of 3 calls.
template <class Call>
double best_seconds(Call&& call) {
  double best = 1e30;
  for (int trial = 0; trial < 3; ++trial) {
    const auto start = std::chrono::steady_clock::now();
    call();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

/// Largest |out - ref| over out's elements (half values widened).
template <class E>
double largest_difference(const std::vector<E>& out, const std::vector<double>& ref) {
  double worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(attnkit::widen(out[i])) - ref[i]));
  return worst;
}

/// One pattern on half inputs of type E: out of type E and of type float, against the float
/// call on the same values and the float64 reference.
template <class E, class Pattern>
void run(const char* title, const Pattern& pattern, long n) {
  std::vector<float> values(static_cast<std::size_t>(3 * kHeads * n * kDim));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.37f * static_cast<float>(i) + 0.1f);
  // The half tensors (what a model holds), and the same values widened, for the comparison.
  std::vector<E> half(values.size());
  std::vector<float> wide(values.size());
  std::vector<double> wide64(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    half[i] = attnkit::store_as<E>(values[i]);
    wide[i] = attnkit::widen(half[i]);
    wide64[i] = wide[i];
  }
  const std::size_t size = static_cast<std::size_t>(kHeads * n * kDim);
  const auto view = [&](auto& buffer, int which) {
    using T = std::remove_reference_t<decltype(buffer[0])>;
    return attnkit::bhld(static_cast<const T*>(buffer.data() + which * size), 1, kHeads, n, kDim);
  };
  std::vector<E> out_half(size);
  std::vector<float> out_float(size), out_wide(size);
  std::vector<double> ref(size);
  const auto out_view = [&](auto& buffer) { return attnkit::bhld(buffer.data(), 1, kHeads, n, kDim); };

  const double t_half = best_seconds(
      [&] { attnkit::attention(pattern, view(half, 0), view(half, 1), view(half, 2), out_view(out_half)); });
  const double t_half_float = best_seconds(
      [&] { attnkit::attention(pattern, view(half, 0), view(half, 1), view(half, 2), out_view(out_float)); });
  const double t_float = best_seconds(
      [&] { attnkit::attention(pattern, view(wide, 0), view(wide, 1), view(wide, 2), out_view(out_wide)); });
  attnkit::reference::attention(pattern, view(wide64, 0), view(wide64, 1), view(wide64, 2), out_view(ref));
  std::printf("%s, n = %ld, H = 8, D = 64:\n", title, n);
  std::printf("  half out   %7.2f ms  max |out - ref| %.2e\n", t_half * 1e3, largest_difference(out_half, ref));
  std::printf("  float out  %7.2f ms  max |out - ref| %.2e\n", t_half_float * 1e3, largest_difference(out_float, ref));
  std::printf("  float call %7.2f ms on the same values widened (%.0f%% of the half call's time)\n", t_float * 1e3,
              100 * t_float / t_half);
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 2048;
  if (n < 1) {
    std::fprintf(stderr, "usage: half_precision [n >= 1]\n");
    return 2;
  }
  // Longformer: a window of radius 128 and two global tokens.
  run<attnkit::bfloat16>("bfloat16 Longformer (window 128, global 0 and 1)",
                         attnkit::Union{attnkit::SlidingWindow::symmetric(128), attnkit::Global({0, 1})}, n);
  run<attnkit::float16>("float16 causal full attention", attnkit::Full{.causal = true}, n);
  return 0;
}
