#pragma once
// Prefill over a KV cache (SPEC.md section 13, the prefill schedule), paired: Lq = 2048 new rows
// of one sequence attending a 32768-token paged float16 cache (64-token pages, a shuffled block
// table), causal, against attnkit::attention on tensors over the same keys held contiguous in
// float16 (the same rows: bottom-right causal), the two calls alternating.
//   paired/cache_prefill/threads:<t>  n = 32768 cached tokens; of_tensor = the tensor call's time
//       over the cache call's per round (median, _min, _max)
// Hq = 8, Hk = 2, D = Dv = 128: the Llama-3 group of 4 with a quarter of its heads, so that one
// call takes seconds, not tens of seconds (the ratio is per head).

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "bench_support.hpp"
#include "dense_paired_bench.hpp"
#include "report.hpp"

namespace attnkit::bench {

inline constexpr double kCachePrefillTarget = 0.90;  // of the tensor call's speed
inline constexpr index_t kCachePrefillRows = 2048, kCachePrefillTokens = 32768, kCachePrefillPage = 64;
inline constexpr int kCachePrefillRounds = 5;

namespace detail {

inline std::string cache_prefill_family(int threads) {
  return "paired/cache_prefill/threads:" + std::to_string(threads);
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
            bhld(v_pages.data(), pages, kKvHeads, kCachePrefillPage, kDim),
            PageTable{table.data(), 1, pages, pages}, lengths};
  }
};

}  // namespace detail

inline void register_cache_prefill_paired(Registry& registry, int threads) {
  using Inputs = detail::CachePrefillInputs;
  for (const int team : detail::peak_teams(threads)) {
    const std::string name = detail::cache_prefill_family(team);
    auto* family =
        register_at(name, sizes(kCachePrefillTokens, kCachePrefillTokens), [=](benchmark::State& state) {
          const Inputs in(state.range(0));
          std::vector<float16> out(in.q.size());
          const Full causal{.causal = true};
          const Options options{.threads = team};
          const auto qv = bhld(in.q.data(), 1, Inputs::kQueryHeads, kCachePrefillRows, Inputs::kDim);
          const auto ov = bhld(out.data(), 1, Inputs::kQueryHeads, kCachePrefillRows, Inputs::kDim);
          const auto timed = [&](auto&& call) {
            const auto start = std::chrono::steady_clock::now();
            call();
            benchmark::DoNotOptimize(out.data());
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          };
          const auto over_cache = [&] { return timed([&] { attention(causal, qv, in.paged(), ov, options); }); };
          const auto on_tensors = [&] {
            return timed([&] {
              attention(causal, qv, bhld(in.k.data(), 1, Inputs::kKvHeads, in.n, Inputs::kDim),
                        bhld(in.v.data(), 1, Inputs::kKvHeads, in.n, Inputs::kDim), ov, options);
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
    registry.add(name, BenchmarkInfo{"paired", "cache_prefill", Inputs::kDim, team});
  }
}

/// The target rows: the cache call at >= 90% of the tensor call's speed.
inline void write_cache_prefill_targets(std::ostream& out, const ReportData& data, int threads) {
  for (const int team : detail::peak_teams(threads)) {
    const std::string name = detail::cache_prefill_family(team);
    const auto value = detail::find_counter(data.runs, name, kCachePrefillTokens, "of_tensor");
    out << "| prefill over a cache: Lq = " << kCachePrefillRows << " over " << kCachePrefillTokens
        << " paged fp16 tokens, causal, " << team << (team == 1 ? " thread" : " threads")
        << ": of the tensor call on contiguous fp16, paired | "
        << (value ? detail::ratio_text(*value, *detail::find_counter(data.runs, name, kCachePrefillTokens, "of_tensor_min"),
                                       *detail::find_counter(data.runs, name, kCachePrefillTokens, "of_tensor_max"), 100,
                                       1, "%")
                  : std::string("not measured"))
        << " | >= " << detail::fixed(100 * kCachePrefillTarget, 0) << "% | "
        << (value ? (*value >= kCachePrefillTarget ? "yes" : "NO") : "-") << " |\n";
  }
}

}  // namespace attnkit::bench
