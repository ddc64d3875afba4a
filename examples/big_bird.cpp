// BigBird (ITC) attention (arXiv 2007.14062) with attnkit: blocks of 64 tokens, the first and
// last block global, a three-block window and 3 random blocks per block row, drawn from a
// counter-based generator keyed by (seed, layer, head, row): the table is the same for any
// thread count. Prints part of the random table and a picture of the blocks, then checks the
// result against the float64 reference and across thread counts. Built and run by ctest.
#include <cmath>
#include <cstdio>
#include <vector>

#include <attnkit/attnkit.hpp>

int main() {
  const long B = 1, H = 4, L = 2048, D = 64, block = 64;
  const attnkit::BigBird big_bird(block, 3, /*seed=*/2024, /*layer=*/0);
  const attnkit::AttentionShape shape{B, H, H, L, L, D, D};

  const long blocks = L / block;
  const std::vector<attnkit::index_t> table = big_bird.random_table(H, blocks);
  std::printf("random key blocks of head 0, block rows 1-4:");
  for (long p = 1; p <= 4; ++p)
    std::printf(" {%ld %ld %ld}", static_cast<long>(table[p * 3]), static_cast<long>(table[p * 3 + 1]),
                static_cast<long>(table[p * 3 + 2]));
  std::printf("\nhead 0, one character per block ('#' attended):\n%s",
              attnkit::ascii_view(big_bird, shape, 0, /*max_cells=*/blocks).c_str());
  const attnkit::PatternCost cost = big_bird.cost(shape);
  std::printf("%.0f attended pairs (density %.2f%%), %.2f GFLOP\n", cost.attended_pairs, 100 * cost.density,
              cost.flops * 1e-9);

  std::vector<float> q(B * H * L * D), k(q.size()), v(q.size()), out(q.size()), one_thread(q.size()), ref(q.size());
  for (std::size_t i = 0; i < q.size(); ++i)
    q[i] = std::sin(0.1f * i), k[i] = std::cos(0.3f * i), v[i] = std::sin(0.7f * i);
  auto view = [&](std::vector<float>& x) { return attnkit::bhld(x.data(), B, H, L, D); };
  attnkit::attention(big_bird, view(q), view(k), view(v), view(out));
  attnkit::attention(big_bird, view(q), view(k), view(v), view(one_thread), attnkit::Options{.threads = 1});
  attnkit::reference::attention(big_bird, view(q), view(k), view(v), view(ref));

  double worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i) worst = std::fmax(worst, std::fabs(out[i] - ref[i]));
  const bool same_for_one_thread = out == one_thread;
  std::printf("max |attnkit - reference| = %.3g; one thread gives %s\n", worst,
              same_for_one_thread ? "the same bits" : "DIFFERENT bits");
  return worst < 1e-4 && same_for_one_thread ? 0 : 1;
}
