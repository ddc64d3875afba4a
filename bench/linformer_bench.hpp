#pragma once
// Linformer benchmarks: whole calls, the projection and the attention apart, and
// the speedup over full attention measured paired in one benchmark; plus the report section
// that sets them beside the Linformer paper's Table 3.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "bench_support.hpp"
#include "report.hpp"

namespace attnkit::bench {

/// The benchmarked Linformer: one shared Gaussian E and F (P = 1) of kp x n, cached per
/// (kp, n) because drawing 2 x 16.8 M entries at n = 65536 takes about a second.
inline const Linformer& benchmark_linformer(index_t kp, index_t n) {
  static std::map<std::pair<index_t, index_t>, std::unique_ptr<Linformer>> cache;
  auto& entry = cache[{kp, n}];
  if (!entry) entry = std::make_unique<Linformer>(Linformer::gaussian(kp, n, 1, 2020));
  return *entry;
}

inline constexpr index_t kLinformerKps[] = {128, 256};

/// Pairs of the paired benchmark at n: enough for a median, few where full attention takes
/// seconds per call (about 20 s at n = 65536 on the 2-core machines).
inline int linformer_pairs(index_t n) { return n <= 8192 ? 7 : n <= 16384 ? 5 : n <= 32768 ? 3 : 1; }

/// Registers, for n = 1024 ... max_n, H = 8, D = Dv = 64 and kp in {128, 256}:
///   attnkit/linformer_kp<kp>           the whole call (FLOP from cost(): projections + attention)
///   linformer_projection/kp<kp>        Linformer::project alone (the 2 kp n (D + Dv) per head)
///   linformer_attention/kp<kp>         Full attention of Q over kp projected keys and values
///   paired/linformer_vs_full           per pair: full, kp = 128, kp = 256 calls in turn;
///                                      counters: median and range of the per-pair speedups
/// and the report section.
inline void register_linformer_benchmarks(Registry& registry, int threads, index_t max_n) {
  constexpr index_t kDim = 64;
  const Options options{.threads = threads};
  for (const index_t kp : kLinformerKps) {
    const std::string kind = "linformer_kp" + std::to_string(kp);
    register_family(registry, kind, kDim, threads, 1024, max_n, [=](benchmark::State& state) {
      time_pattern(state, benchmark_linformer(kp, state.range(0)), kDim, threads);
    });
    register_family(
        registry, "kp" + std::to_string(kp), kDim, threads, 1024, max_n,
        [=](benchmark::State& state) {
          const index_t n = state.range(0);
          const Linformer& lin = benchmark_linformer(kp, n);
          Inputs in(n, kDim);
          std::vector<float> keys(static_cast<std::size_t>(kHeads * kp * kDim)), values(keys.size());
          for (auto _ : state) {
            lin.project<float>(bhld(static_cast<const float*>(in.k.data()), 1, kHeads, n, kDim),
                               bhld(static_cast<const float*>(in.v.data()), 1, kHeads, n, kDim),
                               bhld(keys.data(), 1, kHeads, kp, kDim), bhld(values.data(), 1, kHeads, kp, kDim),
                               options);
            benchmark::DoNotOptimize(keys.data());
          }
          finish(state, n, lin.cost({1, kHeads, kHeads, n, n, kDim, kDim}).extra_flops, threads);
        },
        "linformer_projection");
    register_family(
        registry, "kp" + std::to_string(kp), kDim, threads, 1024, max_n,
        [=](benchmark::State& state) {
          const index_t n = state.range(0);
          Inputs in(n, kDim), projected(kp, kDim);
          for (auto _ : state) {
            attention(Full{}, bhld(static_cast<const float*>(in.q.data()), 1, kHeads, n, kDim),
                      bhld(static_cast<const float*>(projected.k.data()), 1, kHeads, kp, kDim),
                      bhld(static_cast<const float*>(projected.v.data()), 1, kHeads, kp, kDim),
                      bhld(in.out.data(), 1, kHeads, n, kDim), options);
            benchmark::DoNotOptimize(in.out.data());
          }
          finish(state, n, Full{}.cost({1, kHeads, kHeads, n, kp, kDim, kDim}).flops, threads);
        },
        "linformer_attention");
  }

  const std::string paired = "paired/linformer_vs_full/D:64/threads:" + std::to_string(threads);
  auto* family = register_at(paired, sizes(1024, max_n), [=](benchmark::State& state) {
    const index_t n = state.range(0);
    Inputs in(n, kDim);
    const auto seconds = [&](const auto& pattern) { return call_seconds(pattern, in, n, kDim, options); };
    for (const index_t kp : kLinformerKps) seconds(benchmark_linformer(kp, n));  // warm: scratch, pages
    std::vector<double> full_times;
    std::map<index_t, std::vector<double>> times, speedups;
    for (auto _ : state) {
      for (int pair = 0; pair < linformer_pairs(n); ++pair) {
        full_times.push_back(seconds(Full{}));
        for (const index_t kp : kLinformerKps) {
          times[kp].push_back(seconds(benchmark_linformer(kp, n)));
          speedups[kp].push_back(full_times.back() / times[kp].back());
        }
      }
      state.SetIterationTime(median(full_times));
    }
    state.counters["pairs"] = static_cast<double>(full_times.size());
    state.counters["full_s"] = median(full_times);
    for (const index_t kp : kLinformerKps)
      set_paired_counters(state, "kp" + std::to_string(kp), times[kp], speedups[kp]);
    state.counters["flop"] = Full{}.cost({1, kHeads, kHeads, n, n, kDim, kDim}).flops;
  });
  if (family != nullptr) family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  registry.add(paired, BenchmarkInfo{"paired", "linformer_vs_full", kDim, threads});

  registry.add_section([=](std::ostream& out, const ReportData& data) {
    const auto at = [&](const std::string& name, index_t n) { return detail::find_point(data.points, name, n); };
    const auto counter = [&](index_t n, const std::string& name) {
      return detail::find_counter(data.runs, paired, n, name);
    };
    // arXiv 2006.04768, Table 3 (inference time saved over a standard Transformer, V100): the
    // two k = 256 entries PERF.md quotes.
    const std::map<index_t, double> paper_kp256{{16384, 7.8}, {65536, 18.0}};
    const std::string suffix = "/D:64/threads:" + std::to_string(threads);
    out << "\n## Linformer: H = 8, D = Dv = 64, " << threads << " threads, one shared Gaussian E and F\n\n"
        << "Speedup over full attention: paired in one benchmark (full, kp = 128, kp = 256 calls in turn), median of "
           "the per-pair ratios [min, max]. The paper times a whole model's inference on a V100 (attention and "
           "everything else), these rows the attention call alone, so here the ratio keeps growing like n / (2 kp).\n\n"
        << "| n | kp | call (ms) | projection (ms) | attention over kp keys (ms) | GFLOP/s (cost()) | "
           "speedup over full, paired | Linformer paper, Table 3 (V100) |\n|---|---|---|---|---|---|---|---|\n";
    for (index_t n : sizes(1024, max_n)) {
      for (const index_t kp : kLinformerKps) {
        const std::string tag = "kp" + std::to_string(kp);
        const Point* call = at("attnkit/linformer_" + tag + suffix, n);
        const Point* projection = at("linformer_projection/" + tag + suffix, n);
        const Point* attention_part = at("linformer_attention/" + tag + suffix, n);
        out << "| " << n << " | " << kp << " | " << (call ? detail::fixed(call->seconds * 1e3, 2) : "-") << " | "
            << (projection ? detail::fixed(projection->seconds * 1e3, 2) : "-") << " | "
            << (attention_part ? detail::fixed(attention_part->seconds * 1e3, 2) : "-") << " | "
            << (call ? detail::fixed(call->gflops(), 1) : "-") << " | "
            << detail::paired_speedup(data.runs, paired, n, tag) << " | "
            << (kp == 256 && paper_kp256.count(n) ? detail::fixed(paper_kp256.at(n), 1) + "x" : "-") << " |\n";
      }
    }
    out << "\n| target | measured | required | met |\n|---|---|---|---|\n";
    if (const auto speedup = counter(16384, "kp256_speedup")) {
      out << "| Linformer kp = 256, n = 16384: speedup over full, paired | " << detail::fixed(*speedup, 1)
          << "x | >= 20x | " << (*speedup >= 20 ? "yes" : "NO") << " |\n";
    }
    for (const index_t kp : kLinformerKps) {
      const auto points = data.points.find("attnkit/linformer_kp" + std::to_string(kp) + suffix);
      if (points == data.points.end()) continue;
      if (const auto exponent = detail::fitted_exponent(points->second, 4096)) {
        out << "| Linformer kp = " << kp << ": fitted complexity, n = 4096 ... " << max_n << " | "
            << detail::exponent_text(*exponent) << " | exponent <= 1.10 | " << (exponent->value <= 1.1 ? "yes" : "NO")
            << " |\n";
      }
    }
  });
}

}  // namespace attnkit::bench
