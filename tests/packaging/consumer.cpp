// A downstream program: one attention call through the installed or embedded attnkit, checked
// against the reference (and, when the package holds it, the same call through
// attnkit::dispatch). Exit code 0 when they agree.
#include <attnkit/attnkit.hpp>
#if ATTNKIT_CONSUMER_DISPATCH
#include <attnkit/dispatch.hpp>
#endif

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  const long n = 100, dim = 16;
  std::vector<float> q(n * dim), k(n * dim), v(n * dim), out(n * dim), ref(n * dim);
  for (std::size_t i = 0; i < q.size(); ++i) {
    q[i] = std::sin(0.37f * static_cast<float>(i));
    k[i] = std::cos(0.11f * static_cast<float>(i));
    v[i] = std::sin(0.05f * static_cast<float>(i));
  }
  const auto view = [&](std::vector<float>& x) { return attnkit::bhld(x.data(), 1, 1, n, dim); };
  attnkit::attention(attnkit::Full{.causal = true}, view(q), view(k), view(v), view(out));
  attnkit::reference::attention(attnkit::Full{.causal = true}, view(q), view(k), view(v), view(ref));
  float worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i) worst = std::fmax(worst, std::fabs(out[i] - ref[i]));
  std::printf("consumer: max |attnkit - reference| = %g\n", static_cast<double>(worst));
#if ATTNKIT_CONSUMER_DISPATCH
  out.assign(out.size(), 1e30f);  // so that a call writing nothing fails
  attnkit::dispatch::attention(attnkit::Full{.causal = true}, view(q), view(k), view(v), view(out));
  for (std::size_t i = 0; i < out.size(); ++i) worst = std::fmax(worst, std::fabs(out[i] - ref[i]));
  std::printf("consumer: attnkit::dispatch (%s) too: max |difference| = %g\n",
              attnkit::simd_target_name(attnkit::dispatch::simd_target()).data(), static_cast<double>(worst));
#endif
  return worst < 1e-4f ? 0 : 1;
}
