// Decoding from a KV cache: one Llama-3-8B attention layer (32 query heads sharing 8 kv heads,
// head dim 128) with a paged float16 cache of two sequences. The prompts' keys and values are
// appended at once (prefill), then each generation step appends one new row per sequence and
// attends with causal attention and with StreamingLLM's pattern (4 attention sinks and a
// window of 1024). Prints tokens/s and the GB/s of cache read per step, and the largest
// difference of the last step from the float64 reference over the same cache.
//
//   decode [prompt] [steps]   (prompt = 8192 tokens, steps = 32 by default)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <attnkit/attnkit.hpp>

namespace {

constexpr long kQueryHeads = 32, kKvHeads = 8, kDim = 128, kPageSize = 64, kBatch = 2;

/// Deterministic values in [-1, 1).
std::vector<float> values(std::size_t count, std::uint32_t seed) {
  std::vector<float> x(count);
  for (float& v : x) {
    seed = seed * 1664525u + 1013904223u;
    v = static_cast<float>(seed >> 8) * 0x1p-23f - 1.0f;
  }
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  const long prompt = argc > 1 ? std::atol(argv[1]) : 8192;
  const long steps = argc > 2 ? std::atol(argv[2]) : 32;
  const long capacity = prompt + steps;
  const long pages_per_sequence = (capacity + kPageSize - 1) / kPageSize;

  // The page pool, and a block table giving each sequence its own pages (interleaved, as an
  // allocator serving both would hand them out).
  const long pages = kBatch * pages_per_sequence;
  std::vector<attnkit::float16> k_pages(static_cast<std::size_t>(pages * kKvHeads * kPageSize * kDim));
  std::vector<attnkit::float16> v_pages(k_pages.size());
  std::vector<std::int32_t> table(static_cast<std::size_t>(kBatch * pages_per_sequence));
  for (long p = 0; p < pages_per_sequence; ++p)
    for (long b = 0; b < kBatch; ++b)
      table[static_cast<std::size_t>(b * pages_per_sequence + p)] = static_cast<std::int32_t>(p * kBatch + b);
  std::vector<attnkit::index_t> lengths(kBatch, 0);
  const attnkit::PagedKvCache<attnkit::float16> cache{
      attnkit::bhld(k_pages.data(), pages, kKvHeads, kPageSize, kDim),
      attnkit::bhld(v_pages.data(), pages, kKvHeads, kPageSize, kDim),
      attnkit::PageTable{table.data(), kBatch, pages_per_sequence, pages_per_sequence}, lengths};

  // Prefill: the prompts' keys and values, [B, Hk, prompt, D] in float, rounded into the cache.
  const std::vector<float> k_prompt = values(static_cast<std::size_t>(kBatch * kKvHeads * prompt * kDim), 1);
  const std::vector<float> v_prompt = values(k_prompt.size(), 2);
  attnkit::append(cache, attnkit::bhld(k_prompt.data(), kBatch, kKvHeads, prompt, kDim),
                  attnkit::bhld(v_prompt.data(), kBatch, kKvHeads, prompt, kDim));

  const attnkit::Full causal{.causal = true};
  // StreamingLLM: 4 attention sinks (seen by every row from its own position on) and a causal
  // window of 1024 past keys.
  const attnkit::SlidingWindow streaming = attnkit::SlidingWindow::streaming(1024, 4);
  std::vector<float> q(static_cast<std::size_t>(kBatch * kQueryHeads * kDim)), out(q.size());
  double causal_seconds = 0, streaming_seconds = 0, causal_bytes = 0, streaming_bytes = 0;
  for (long step = 0; step < steps; ++step) {
    const std::vector<float> k_new = values(static_cast<std::size_t>(kBatch * kKvHeads * kDim), 100 + step);
    const std::vector<float> v_new = values(k_new.size(), 200 + step);
    q = values(q.size(), 300 + step);
    attnkit::append(cache, attnkit::bhld(k_new.data(), kBatch, kKvHeads, 1, kDim),
                    attnkit::bhld(v_new.data(), kBatch, kKvHeads, 1, kDim));
    const auto qv = attnkit::bhld(static_cast<const float*>(q.data()), kBatch, kQueryHeads, 1, kDim);
    const auto ov = attnkit::bhld(out.data(), kBatch, kQueryHeads, 1, kDim);
    auto start = std::chrono::steady_clock::now();
    attnkit::attention(streaming, qv, cache, ov);
    streaming_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    start = std::chrono::steady_clock::now();
    attnkit::attention(causal, qv, cache, ov);
    causal_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Bytes read per step: K and V rows (2 bytes a value) of every attended key.
    for (attnkit::index_t length : lengths) {
      causal_bytes += 2.0 * kKvHeads * static_cast<double>(length) * kDim * 2;
      streaming_bytes += 2.0 * kKvHeads * static_cast<double>(std::min<attnkit::index_t>(length, 1025 + 4)) * kDim * 2;
    }
  }
  std::printf("%ld steps over %ld prompt tokens, %ld sequences, float16 paged cache:\n", steps, prompt, kBatch);
  std::printf("  causal      %8.1f tokens/s  %6.2f GB/s of cache read\n", kBatch * steps / causal_seconds,
              causal_bytes / causal_seconds * 1e-9);
  std::printf("  StreamingLLM %7.1f tokens/s  %6.2f GB/s (4 sinks + window 1024)\n", kBatch * steps / streaming_seconds,
              streaming_bytes / streaming_seconds * 1e-9);

  // The last step's causal output against the float64 reference on the same cache.
  std::vector<double> reference(out.size());
  attnkit::reference::attention(causal,
                                attnkit::bhld(static_cast<const float*>(q.data()), kBatch, kQueryHeads, 1, kDim), cache,
                                attnkit::bhld(reference.data(), kBatch, kQueryHeads, 1, kDim));
  double worst = 0;
  for (std::size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(out[i] - reference[i]));
  std::printf("  last step: max |out - float64 reference| = %.2e\n", worst);
  return worst < 1e-4 ? 0 : 1;
}
