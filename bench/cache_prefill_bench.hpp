#pragma once
// Prefill over a KV cache (SPEC.md section 13, the prefill schedule), paired: Lq = 2048 new rows
// of one sequence attending a 32768-token paged float16 cache (64-token pages, a shuffled block
// table), causal, against attnkit::attention on tensors over the same keys held contiguous in
// float16 (the same rows: bottom-right causal), the two calls alternating.
//   paired/cache_prefill/threads:<t>  n = 32768 cached tokens; of_tensor = the tensor call's time
//       over the cache call's per round (median, _min, _max)
//   paired/mixed_batch/threads:<t>  n = 32768 tokens in each of 8 sequences (paged float16): one
//       call with packed rows (query_offsets: a 1024-row prompt chunk for sequence 0, one row for
//       each of the 7 others) against the two calls it replaces (the chunk over sequence 0 alone,
//       then the 7 one-row decodes over sequences 1 .. 7); of_separate = the two calls' time
//       over the one call's per round
// Hq = 8, Hk = 2, D = Dv = 128: the Llama-3 group of 4 with a quarter of its heads, so that one
// call takes seconds, not tens of seconds (the ratio is per head).

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "bench_support.hpp"
#include "dense_paired_bench.hpp"
#include "report.hpp"

namespace attnkit::bench {

inline constexpr double kCachePrefillTarget = 0.90;  // of the tensor call's speed
inline constexpr double kMixedBatchTarget = 0.90;    // of the two separate calls' speed
inline constexpr index_t kMixedBatchChunk = 1024, kMixedBatchSequences = 8;
inline constexpr index_t kCachePrefillRows = 2048, kCachePrefillTokens = 32768, kCachePrefillPage = 64;
inline constexpr int kCachePrefillRounds = 5;

namespace detail {

inline std::string cache_prefill_family(int threads) {
  return "paired/cache_prefill/threads:" + std::to_string(threads);
}
inline std::string mixed_batch_family(int threads) { return "paired/mixed_batch/threads:" + std::to_string(threads); }

/// Seconds of call().
template <class Call>
double seconds_of(Call&& call) {
  const auto start = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The keys and values of one sequence twice: contiguous [1, Hk, n, D] and in pages of a
/// shuffled block table; the query rows of its last kCachePrefillRows positions.
struct CachePrefillInputs {
  static constexpr index_t kQueryHeads = 8, kKvHeads = 2, kDim = 128;
  index_t n;
  std::vector<float16> k, v, k_pages, v_pages, q;
  std::vector<std::int32_t> table;
  std::vector<index_t> lengths;

  explicit CachePrefillInputs(index_t tokens) : n(tokens), lengths{tokens} {
    const index_t pages = tokens / kCachePrefillPage;
    k.resize(static_cast<std::size_t>(kKvHeads * n * kDim));
    v.resize(k.size());
    k_pages.resize(k.size());
    v_pages.resize(k.size());
    q.resize(static_cast<std::size_t>(kQueryHeads * kCachePrefillRows * kDim));
    // N(0, 1) values, a 4096-value draw repeated (as decode's caches).
    const std::vector<float>& keys = normal_values(4096, 11);
    const std::vector<float>& values = normal_values(4096, 12);
    for (std::size_t i = 0; i < k.size(); ++i) {
      k[i] = to_float16(keys[(i * 7) % keys.size()]);
      v[i] = to_float16(values[(i * 7) % values.size()]);
    }
    const std::vector<float>& queries = normal_values(q.size(), 13);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = to_float16(queries[i]);
    for (index_t p = 0; p < pages; ++p) table.push_back(static_cast<std::int32_t>((p * 37 + 11) % pages));
    // Token t of kv head h: page table[t / page], slot t % page of [pages, Hk, page, D].
    for (index_t h = 0; h < kKvHeads; ++h)
      for (index_t t = 0; t < n; ++t) {
        const index_t page = table[static_cast<std::size_t>(t / kCachePrefillPage)];
        const index_t to = ((page * kKvHeads + h) * kCachePrefillPage + t % kCachePrefillPage) * kDim;
        const index_t from = (h * n + t) * kDim;
        std::copy_n(k.begin() + from, kDim, k_pages.begin() + to);
        std::copy_n(v.begin() + from, kDim, v_pages.begin() + to);
      }
  }

  PagedKvCache<const float16> paged() const {
    const index_t pages = n / kCachePrefillPage;
    return {bhld(k_pages.data(), pages, kKvHeads, kCachePrefillPage, kDim),
            bhld(v_pages.data(), pages, kKvHeads, kCachePrefillPage, kDim), PageTable{table.data(), 1, pages, pages},
            lengths};
  }
};

/// kMixedBatchSequences sequences of n tokens in one paged float16 pool (pages handed out
/// round-robin, as a growing batch gets them), and the packed query rows of the mixed call.
struct MixedBatchInputs {
  static constexpr index_t kQueryHeads = 8, kKvHeads = 2, kDim = 128;
  index_t n, pages_per_sequence;
  std::vector<float16> k_pages, v_pages, q;
  std::vector<std::int32_t> table;
  std::vector<index_t> lengths, offsets;

  explicit MixedBatchInputs(index_t tokens)
      : n(tokens), pages_per_sequence(tokens / kCachePrefillPage), lengths(kMixedBatchSequences, tokens) {
    const index_t pages = kMixedBatchSequences * pages_per_sequence;
    k_pages.resize(static_cast<std::size_t>(pages * kKvHeads * kCachePrefillPage * kDim));
    v_pages.resize(k_pages.size());
    const std::vector<float>& keys = normal_values(4096, 14);
    const std::vector<float>& values = normal_values(4096, 15);
    for (std::size_t i = 0; i < k_pages.size(); ++i) {
      k_pages[i] = to_float16(keys[(i * 7) % keys.size()]);
      v_pages[i] = to_float16(values[(i * 7) % values.size()]);
    }
    for (index_t b = 0; b < kMixedBatchSequences; ++b)
      for (index_t p = 0; p < pages_per_sequence; ++p)
        table.push_back(static_cast<std::int32_t>(p * kMixedBatchSequences + b));
    offsets.push_back(0);
    offsets.push_back(kMixedBatchChunk);
    for (index_t b = 1; b < kMixedBatchSequences; ++b) offsets.push_back(offsets.back() + 1);
    const std::vector<float>& queries =
        normal_values(static_cast<std::size_t>(kQueryHeads * offsets.back() * kDim), 16);
    for (float x : queries) q.push_back(to_float16(x));
  }

  /// Sequences [first, first + count) of the pool.
  PagedKvCache<const float16> sequences(index_t first, index_t count) const {
    const index_t pages = kMixedBatchSequences * pages_per_sequence;
    return {bhld(k_pages.data(), pages, kKvHeads, kCachePrefillPage, kDim),
            bhld(v_pages.data(), pages, kKvHeads, kCachePrefillPage, kDim),
            PageTable{table.data() + first * pages_per_sequence, count, pages_per_sequence, pages_per_sequence},
            std::span<const index_t>(lengths.data() + first, static_cast<std::size_t>(count))};
  }
};

}  // namespace detail

inline void register_cache_prefill_paired(Registry& registry, int threads) {
  using PrefillInputs = detail::CachePrefillInputs;
  for (const int team : detail::peak_teams(threads)) {
    const std::string name = detail::cache_prefill_family(team);
    auto* family = register_at(name, sizes(kCachePrefillTokens, kCachePrefillTokens), [=](benchmark::State& state) {
      const PrefillInputs in(state.range(0));
      std::vector<float16> out(in.q.size());
      const Full causal{.causal = true};
      const Options options{.threads = team};
      const auto qv = bhld(in.q.data(), 1, PrefillInputs::kQueryHeads, kCachePrefillRows, PrefillInputs::kDim);
      const auto ov = bhld(out.data(), 1, PrefillInputs::kQueryHeads, kCachePrefillRows, PrefillInputs::kDim);
      const auto over_cache = [&] {
        return detail::seconds_of([&] { attention(causal, qv, in.paged(), ov, options); });
      };
      const auto on_tensors = [&] {
        return detail::seconds_of([&] {
          attention(causal, qv, bhld(in.k.data(), 1, PrefillInputs::kKvHeads, in.n, PrefillInputs::kDim),
                    bhld(in.v.data(), 1, PrefillInputs::kKvHeads, in.n, PrefillInputs::kDim), ov, options);
        });
      };
      over_cache();  // warm: scratch, pages of the widened K/V
      std::vector<double> cache_times, ratios;
      for (auto _ : state) {
        for (int round = 0; round < kCachePrefillRounds; ++round) {
          double cache = 0, tensor = 0;
          if (round % 2 == 0) {
            cache = over_cache(), tensor = on_tensors();
          } else {
            tensor = on_tensors(), cache = over_cache();
          }
          cache_times.push_back(cache);
          ratios.push_back(tensor / cache);
        }
        state.SetIterationTime(median(cache_times));
      }
      set_ratio_counters(state, "of_tensor", ratios);
    });
    if (family == nullptr) continue;
    family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
    registry.add(name, BenchmarkInfo{"paired", "cache_prefill", PrefillInputs::kDim, team});
  }
}

inline void register_mixed_batch_paired(Registry& registry, int threads) {
  using MixedInputs = detail::MixedBatchInputs;
  for (const int team : detail::peak_teams(threads)) {
    const std::string name = detail::mixed_batch_family(team);
    auto* family = register_at(name, sizes(kCachePrefillTokens, kCachePrefillTokens), [=](benchmark::State& state) {
      const MixedInputs in(state.range(0));
      const index_t total = in.offsets.back(), decodes = kMixedBatchSequences - 1;
      std::vector<float16> out(in.q.size()),
          chunk_q(static_cast<std::size_t>(MixedInputs::kQueryHeads * kMixedBatchChunk * MixedInputs::kDim)),
          decode_q(static_cast<std::size_t>(decodes * MixedInputs::kQueryHeads * MixedInputs::kDim));
      // The separate calls' queries: [1, Hq, 1024, D] and [7, Hq, 1, D], from the packed rows.
      for (index_t h = 0; h < MixedInputs::kQueryHeads; ++h) {
        std::copy_n(in.q.begin() + h * total * MixedInputs::kDim, kMixedBatchChunk * MixedInputs::kDim,
                    chunk_q.begin() + h * kMixedBatchChunk * MixedInputs::kDim);
        for (index_t b = 0; b < decodes; ++b)
          std::copy_n(in.q.begin() + (h * total + kMixedBatchChunk + b) * MixedInputs::kDim, MixedInputs::kDim,
                      decode_q.begin() + (b * MixedInputs::kQueryHeads + h) * MixedInputs::kDim);
      }
      const Full causal{.causal = true};
      const Options options{.threads = team};
      const auto one_call = [&] {
        return detail::seconds_of([&] {
          attention(causal, bhld(in.q.data(), 1, MixedInputs::kQueryHeads, total, MixedInputs::kDim), in.offsets,
                    in.sequences(0, kMixedBatchSequences),
                    bhld(out.data(), 1, MixedInputs::kQueryHeads, total, MixedInputs::kDim), options);
        });
      };
      const auto two_calls = [&] {
        return detail::seconds_of([&] {
          attention(causal, bhld(chunk_q.data(), 1, MixedInputs::kQueryHeads, kMixedBatchChunk, MixedInputs::kDim),
                    in.sequences(0, 1),
                    bhld(out.data(), 1, MixedInputs::kQueryHeads, kMixedBatchChunk, MixedInputs::kDim), options);
          attention(causal, bhld(decode_q.data(), decodes, MixedInputs::kQueryHeads, 1, MixedInputs::kDim),
                    in.sequences(1, decodes), bhld(out.data(), decodes, MixedInputs::kQueryHeads, 1, MixedInputs::kDim),
                    options);
        });
      };
      one_call();  // warm
      std::vector<double> times, ratios;
      for (auto _ : state) {
        for (int round = 0; round < kCachePrefillRounds; ++round) {
          double one = 0, two = 0;
          if (round % 2 == 0) {
            one = one_call(), two = two_calls();
          } else {
            two = two_calls(), one = one_call();
          }
          times.push_back(one);
          ratios.push_back(two / one);
        }
        state.SetIterationTime(median(times));
      }
      set_ratio_counters(state, "of_separate", ratios);
    });
    if (family == nullptr) continue;
    family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
    registry.add(name, BenchmarkInfo{"paired", "mixed_batch", MixedInputs::kDim, team});
  }
}

/// The target rows: the cache call at >= 90% of the tensor call's speed; the mixed batch at
/// >= 90% of the two calls'.
inline void write_cache_prefill_targets(std::ostream& out, const ReportData& data, int threads) {
  for (const int team : detail::peak_teams(threads)) {
    const std::string name = detail::cache_prefill_family(team);
    const auto value = detail::find_counter(data.runs, name, kCachePrefillTokens, "of_tensor");
    out << "| prefill over a cache: Lq = " << kCachePrefillRows << " over " << kCachePrefillTokens
        << " paged fp16 tokens, causal, " << team << (team == 1 ? " thread" : " threads")
        << ": of the tensor call on contiguous fp16, paired | "
        << (value ? detail::ratio_text(
                        *value, *detail::find_counter(data.runs, name, kCachePrefillTokens, "of_tensor_min"),
                        *detail::find_counter(data.runs, name, kCachePrefillTokens, "of_tensor_max"), 100, 1, "%")
                  : std::string("not measured"))
        << " | >= " << detail::fixed(100 * kCachePrefillTarget, 0) << "% | "
        << (value ? (*value >= kCachePrefillTarget ? "yes" : "NO") : "-") << " |\n";
    const std::string mixed = detail::mixed_batch_family(team);
    const auto ratio = detail::find_counter(data.runs, mixed, kCachePrefillTokens, "of_separate");
    out << "| mixed batch: a " << kMixedBatchChunk << "-row chunk and " << kMixedBatchSequences - 1
        << " one-row decodes over " << kCachePrefillTokens << "-token paged fp16 caches in one call, " << team
        << (team == 1 ? " thread" : " threads") << ": of the two separate calls, paired | "
        << (ratio ? detail::ratio_text(
                        *ratio, *detail::find_counter(data.runs, mixed, kCachePrefillTokens, "of_separate_min"),
                        *detail::find_counter(data.runs, mixed, kCachePrefillTokens, "of_separate_max"), 100, 1, "%")
                  : std::string("not measured"))
        << " | >= " << detail::fixed(100 * kMixedBatchTarget, 0) << "% | "
        << (ratio ? (*ratio >= kMixedBatchTarget ? "yes" : "NO") : "-") << " |\n";
  }
}

}  // namespace attnkit::bench
