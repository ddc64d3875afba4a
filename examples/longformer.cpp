// Longformer self-attention (arXiv 2004.05150) with attnkit: a band of 512 tokens (radius 256
// each side), a dilation per head (1 on the first heads, 2 and 4 on the last), a global [CLS]
// token at position 0 with its own query/key/value projections. Checks the result against
// the float64 reference assembled from SPEC.md section 4. Built and run by ctest.
#include <cmath>
#include <cstdio>
#include <vector>

#include <attnkit/attnkit.hpp>

int main() {
  const long B = 1, H = 8, L = 2048, D = 64;
  const attnkit::Union longformer{attnkit::Dilated::symmetric(256, {1, 1, 1, 1, 2, 2, 4, 4}), attnkit::Global({0})};

  // Inputs: local projections q, k, v and the [CLS] token's own qg, kg, vg.
  std::vector<float> q(B * H * L * D), k(q.size()), v(q.size()), qg(q.size()), kg(q.size()), vg(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) {
    q[i] = std::sin(0.1f * i), k[i] = std::cos(0.3f * i), v[i] = std::sin(0.7f * i);
    qg[i] = std::cos(0.2f * i), kg[i] = std::sin(0.5f * i), vg[i] = std::cos(0.9f * i);
  }
  std::vector<float> out(q.size());
  auto view = [&](std::vector<float>& x) { return attnkit::bhld(x.data(), B, H, L, D); };
  const attnkit::GlobalProjections<float> global{view(qg), view(kg), view(vg)};

  attnkit::attention(longformer, view(q), view(k), view(v), global, view(out));

  const attnkit::AttentionShape shape{B, H, H, L, L, D, D};
  const attnkit::PatternCost cost = longformer.cost(shape);
  std::printf("Longformer, n = %ld: %.0f attended pairs (density %.2f%%), %.2f GFLOP\n", L, cost.attended_pairs,
              100 * cost.density, cost.flops * 1e-9);
  std::printf("keys per row, head 7 (dilation 4): [CLS] %ld, row 1000 %ld, last row %ld\n",
              static_cast<long>(attnkit::attended_keys(longformer, shape, 7, 0)),
              static_cast<long>(attnkit::attended_keys(longformer, shape, 7, 1000)),
              static_cast<long>(attnkit::attended_keys(longformer, shape, 7, L - 1)));

  // Reference: local rows from the pattern with q, k, v; the [CLS] row from full attention
  // with qg, kg, vg.
  std::vector<float> local(q.size()), global_rows(q.size());
  attnkit::reference::attention(longformer, view(q), view(k), view(v), view(local));
  attnkit::reference::attention(attnkit::Full{}, view(qg), view(kg), view(vg), view(global_rows));
  double worst = 0;
  for (long h = 0; h < H; ++h)
    for (long i = 0; i < L; ++i)
      for (long d = 0; d < D; ++d) {
        const std::size_t e = static_cast<std::size_t>((h * L + i) * D + d);
        worst = std::fmax(worst, std::fabs(out[e] - (i == 0 ? global_rows[e] : local[e])));
      }
  std::printf("max |attnkit - reference| = %.3g\n", worst);
  return worst < 1e-4 ? 0 : 1;
}
