// Reformer LSH attention (arXiv 2001.04451) with attnkit, configured as a Hugging Face /
// trax Reformer layer: shared query-key vectors, chunks of 64, two hash rounds, one chunk
// before and none after, causal (a decoder). Prints the bucket layout and the work split from
// cost(), checks the result against the float64 reference (given the same bucket ids) and
// shows the conversion of HF/trax logits. Built and run by ctest.
//
// HF and trax scale the keys to x_j / sqrt(||x_j||^2 + D 1e-6) (their length
// normalisation, then 1/sqrt(D)) and apply no further scale to <q_i, k_j>: that is attnkit's
// unit key x_j / ||x_j|| with Options::scale = 1 (the two differ by a relative D 1e-6 /
// ||x_j||^2, below float rounding for any trained layer). Their random rotations, the tensor
// `random_rotations` of shape [H, D, R, sum(num_buckets) / 2] that HF draws per call (fixed by
// config.hash_seed), can be copied into Lsh::rotations as they are, in that order, to
// reproduce their buckets exactly.
#include <cmath>
#include <cstdio>
#include <vector>

#include <attnkit/attnkit.hpp>

int main() {
  const long B = 1, H = 2, L = 4096, D = 64;
  attnkit::Lsh lsh{.chunk = 64, .rounds = 2, .causal = true, .seed = 1, .layer = 3};
  const attnkit::Options hf_scaling{.scale = 1.0};  // HF/trax: unit keys, no 1/sqrt(D)

  const attnkit::kernel::LshBucketLayout layout = lsh.bucket_layout(L);
  const attnkit::PatternCost cost = lsh.cost({B, H, H, L, L, D, D});
  std::printf(
      "LSH over n = %ld: %ld buckets (%zu factors, %ld rotation columns per round), %.3f GFLOP of which hashing "
      "%.3f (full attention: %.2f)\n",
      L, layout.buckets, layout.factors.size(), layout.columns, cost.flops * 1e-9, cost.extra_flops * 1e-9,
      attnkit::Full{.causal = true}.cost({B, H, H, L, L, D, D}).flops * 1e-9);

  std::vector<float> x(B * H * L * D), v(x.size()), out(x.size()), ref(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.37f * i) + 0.3f * std::cos(1.3f * i), v[i] = std::sin(0.7f * i);
  auto view = [&](std::vector<float>& t) { return attnkit::bhld(t.data(), B, H, L, D); };

  // The bucket ids are inspectable, ids(b, h, r, i); the reference is given the same ids.
  const attnkit::LshBucketIds ids = lsh.hash<float>(view(x));
  std::printf("row 0 of head 0 hashes to buckets %d and %d\n", ids(0, 0, 0, 0), ids(0, 0, 1, 0));
  attnkit::attention(lsh, view(x), view(x), view(v), view(out), hf_scaling);
  attnkit::reference::lsh_attention<float>(lsh, ids, view(x), view(x), view(v), view(ref), hf_scaling);

  double worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i) worst = std::fmax(worst, std::fabs(out[i] - ref[i]));
  std::printf("max |attnkit - reference| = %.3g\n", worst);
  return std::isfinite(worst) && worst <= 1e-4 ? 0 : 1;
}
