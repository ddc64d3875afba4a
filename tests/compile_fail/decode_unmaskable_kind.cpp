// Compile-fail test: attention over a KV cache with a kind that cannot decode (Linformer
// projects the whole key sequence) must be rejected at compile time with the decode front
// door's message naming the rule. Built with ATTNKIT_CONTROL_BUILD the pattern is a causal
// window, and the call must compile.
#include <vector>

#include <attnkit/attnkit.hpp>

int main() {
#if defined(ATTNKIT_CONTROL_BUILD)
  const auto pattern = attnkit::SlidingWindow::causal(4);
#else
  const auto pattern = attnkit::Linformer::gaussian(4, 8, 1, 0);
#endif
  float q[4] = {}, out[4] = {}, k[32] = {}, v[32] = {};
  std::vector<attnkit::index_t> lengths{8};
  const attnkit::KvCache<float> cache{attnkit::bhld(k, 1, 1, 8, 4), attnkit::bhld(v, 1, 1, 8, 4), lengths};
  attnkit::attention(pattern, attnkit::bhld(static_cast<const float*>(q), 1, 1, 1, 4), cache,
                     attnkit::bhld(out, 1, 1, 1, 4));
  return 0;
}
