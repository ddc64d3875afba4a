// Linformer attention (arXiv 2006.04768) with attnkit: keys and values of a batch of two
// padded sequences projected along the sequence to kp = 128 rows by fairseq-style
// initialised E and F (one pair shared by all heads), then softmax attention over the
// projected keys. Prints the work split from cost(), checks the result against the float64
// reference and the projections against project(). Built and run by ctest.
#include <cmath>
#include <cstdio>
#include <vector>

#include <attnkit/attnkit.hpp>

int main() {
  const long B = 2, H = 4, L = 2048, D = 64, kp = 128, n_max = 4096;
  const attnkit::Linformer linformer = attnkit::Linformer::xavier_uniform(kp, n_max, /*heads=*/1, /*seed=*/7);
  // The second sequence holds 1500 real tokens: its padded K/V rows are never read.
  const attnkit::Options options{.key_lengths = {L, 1500}};

  const attnkit::PatternCost cost = linformer.cost({B, H, H, L, L, D, D});
  std::printf("Linformer kp = %ld over n = %ld: %.2f GFLOP, of which projections %.2f (full attention: %.2f)\n", kp, L,
              cost.flops * 1e-9, cost.extra_flops * 1e-9, attnkit::Full{}.cost({B, H, H, L, L, D, D}).flops * 1e-9);

  std::vector<float> q(B * H * L * D), k(q.size()), v(q.size()), out(q.size()), ref(q.size());
  for (std::size_t i = 0; i < q.size(); ++i)
    q[i] = std::sin(0.1f * i), k[i] = std::cos(0.3f * i), v[i] = std::sin(0.7f * i);
  for (long h = 0; h < H; ++h)  // padding holds garbage, as it may in a real batch
    for (long j = 1500; j < L; ++j) k[((1 * H + h) * L + j) * D] = v[((1 * H + h) * L + j) * D] = NAN;
  auto view = [&](std::vector<float>& x) { return attnkit::bhld(x.data(), B, H, L, D); };
  attnkit::attention(linformer, view(q), view(k), view(v), view(out), options);
  attnkit::reference::attention(linformer, view(q), view(k), view(v), view(ref), options);

  // The output is a mix of projected values F V, not of V rows: compare relative to max |F V|.
  std::vector<float> keys(B * H * kp * D), values(keys.size());
  linformer.project<float>(view(k), view(v), attnkit::bhld(keys.data(), B, H, kp, D),
                           attnkit::bhld(values.data(), B, H, kp, D), options);
  double fv_max = 0, worst = 0;
  for (float x : values) fv_max = std::fmax(fv_max, std::fabs(x));
  for (std::size_t i = 0; i < out.size(); ++i) worst = std::fmax(worst, std::fabs(out[i] - ref[i]));
  std::printf("max |F V| = %.3g; max |attnkit - reference| = %.3g\n", fv_max, worst);
  return std::isfinite(worst) && worst <= 1e-4 * fv_max ? 0 : 1;
}
