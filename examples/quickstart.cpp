// Quick start: causal attention over [batch, heads, tokens, head dim] buffers, checked against
// the float64 reference. Built and run by ctest (example_quickstart).
#include <cmath>
#include <cstdio>
#include <vector>

#include <attnkit/attnkit.hpp>

int main() {
  const long B = 1, H = 8, L = 1024, D = 64;
  std::vector<float> q(B * H * L * D), k(q.size()), v(q.size()), out(q.size()), ref(q.size());
  for (std::size_t i = 0; i < q.size(); ++i)
    q[i] = std::sin(0.1f * i), k[i] = std::cos(0.3f * i), v[i] = std::sin(0.7f * i);
  auto view = [&](std::vector<float>& x) { return attnkit::bhld(x.data(), B, H, L, D); };

  attnkit::attention(attnkit::Full{.causal = true}, view(q), view(k), view(v), view(out));

  attnkit::reference::attention(attnkit::Full{.causal = true}, view(q), view(k), view(v), view(ref));
  double worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i) worst = std::fmax(worst, std::fabs(out[i] - ref[i]));
  std::printf("max |attnkit - reference| = %.3g\n", worst);
  return worst < 1e-4 ? 0 : 1;
}
