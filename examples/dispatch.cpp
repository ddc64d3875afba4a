// Runtime dispatch: the quick start's call through attnkit::dispatch, which runs the kernels of
// the widest instruction set this CPU has (SSE2, AVX2 + FMA or AVX-512) although this program
// is built with default compiler flags. Prints the target, then full attention's GFLOP/s
// through attnkit::dispatch and through attnkit::attention as compiled here (SSE2 with default
// flags), the calls alternating; checks both against the float64 reference.
//
//   dispatch [n]        (n = 2048 by default; ATTNKIT_SIMD_TARGET=sse2|avx2|avx512 forces one)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <attnkit/attnkit.hpp>
#include <attnkit/dispatch.hpp>

int main(int argc, char** argv) {
  const long B = 1, H = 8, D = 64, L = argc > 1 ? std::atol(argv[1]) : 2048;
  if (L < 1) {
    std::fprintf(stderr, "usage: dispatch [n >= 1]\n");
    return 2;
  }
  std::vector<float> q(B * H * L * D), k(q.size()), v(q.size()), out(q.size()), mine(q.size());
  for (std::size_t i = 0; i < q.size(); ++i)
    q[i] = std::sin(0.1f * i), k[i] = std::cos(0.3f * i), v[i] = std::sin(0.7f * i);
  auto view = [&](std::vector<float>& x) { return attnkit::bhld(x.data(), B, H, L, D); };
  std::printf("attnkit::dispatch target: %s; attnkit::attention here: %s\n",
              attnkit::simd_target_name(attnkit::dispatch::simd_target()).data(), attnkit::simd::arch_name());

  const auto seconds = [](auto&& call) {
    const auto start = std::chrono::steady_clock::now();
    call();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const double flops = attnkit::Full{}.cost(attnkit::AttentionShape{B, H, H, L, L, D, D}).flops;
  std::vector<double> dispatched, compiled;
  for (int pair = 0; pair < 5; ++pair) {
    dispatched.push_back(
        seconds([&] { attnkit::dispatch::attention(attnkit::Full{}, view(q), view(k), view(v), view(out)); }));
    compiled.push_back(seconds([&] { attnkit::attention(attnkit::Full{}, view(q), view(k), view(v), view(mine)); }));
  }
  std::sort(dispatched.begin(), dispatched.end());
  std::sort(compiled.begin(), compiled.end());
  std::printf(
      "full attention, n = %ld, H = 8, D = 64: dispatch %.1f GFLOP/s, attnkit::attention as compiled %.1f GFLOP/s "
      "(medians of 5 alternating calls)\n",
      L, flops / dispatched[2] * 1e-9, flops / compiled[2] * 1e-9);

  // Both against the reference on the first 64 query rows of every head (the reference is
  // O(n^2) in float64).
  const long rows = std::min(L, 64L);
  std::vector<float> ref(B * H * rows * D), q_rows(ref.size());
  for (long h = 0; h < H; ++h) std::copy_n(q.begin() + h * L * D, rows * D, q_rows.begin() + h * rows * D);
  attnkit::reference::attention(attnkit::Full{}, attnkit::bhld<const float>(q_rows.data(), B, H, rows, D), view(k),
                                view(v), attnkit::bhld(ref.data(), B, H, rows, D));
  double worst = 0;
  for (long h = 0; h < H; ++h)
    for (long e = 0; e < rows * D; ++e) {
      const double expected = ref[h * rows * D + e];
      worst = std::fmax(worst, std::fabs(out[h * L * D + e] - expected));
      worst = std::fmax(worst, std::fabs(mine[h * L * D + e] - expected));
    }
  std::printf("max |attnkit - reference| = %.3g\n", worst);
  return worst < 1e-4 ? 0 : 1;
}
