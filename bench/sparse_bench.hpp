#pragma once
// The sparse patterns against full attention, paired (PERF.md): full attention and each
// pattern of bench_patterns.hpp called in turn inside one benchmark, so that every ratio the
// report gives for them compares calls seconds apart, not families minutes apart.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "bench_patterns.hpp"
#include "bench_support.hpp"
#include "report.hpp"

namespace attnkit::bench {

inline constexpr index_t kSparsePairedN = 16384;
inline constexpr int kSparsePairs = 5;

/// Registers paired/sparse_vs_full at n = 16384 (H = 8, D = Dv = 64): per pair, full
/// attention, then each sparse pattern. Counters per pattern <kind>: <kind>_efficiency (median
/// per pair of its GFLOP/s on attended pairs over full attention's, i.e. (flops_kind / t_kind)
/// / (flops_full / t_full)), <kind>_efficiency_min and _max; dilated_over_window (median per
/// pair of t_dilated / t_window at the same radius); pairs. Adds the report rows.
inline void register_sparse_paired(Registry& registry, int threads) {
  constexpr index_t kDim = 64;
  const std::string name = "paired/sparse_vs_full/D:64/threads:" + std::to_string(threads);
  auto* family = register_at(name, sizes(kSparsePairedN, kSparsePairedN), [=](benchmark::State& state) {
    const index_t n = state.range(0);
    Inputs in(n, kDim);
    const Options options{.threads = threads};
    const AttentionShape shape{1, kHeads, kHeads, n, n, kDim, kDim};
    const double full_flops = Full{}.cost(shape).flops;
    const auto seconds = [&](const auto& pattern) { return call_seconds(pattern, in, n, kDim, options); };
    for (const std::string& kind : sparse_pattern_names()) {  // warm: scratch, pages
      with_sparse_pattern(kind, n, [&](const auto& pattern) { seconds(pattern); });
    }
    std::vector<double> full_times, dilated_over_window;
    std::map<std::string, std::vector<double>> efficiencies;
    for (auto _ : state) {
      for (int pair = 0; pair < kSparsePairs; ++pair) {
        full_times.push_back(seconds(Full{}));
        std::map<std::string, double> times;
        for (const std::string& kind : sparse_pattern_names()) {
          with_sparse_pattern(kind, n, [&](const auto& pattern) {
            times[kind] = seconds(pattern);
            efficiencies[kind].push_back((pattern.cost(shape).flops / times[kind]) / (full_flops / full_times.back()));
          });
        }
        dilated_over_window.push_back(times["dilated_r256_d4"] / times["window_r256"]);
      }
      state.SetIterationTime(median(full_times));
    }
    state.counters["pairs"] = static_cast<double>(full_times.size());
    state.counters["full_s"] = median(full_times);
    state.counters["dilated_over_window"] = median(dilated_over_window);
    for (const auto& [kind, values] : efficiencies) set_ratio_counters(state, kind + "_efficiency", values);
  });
  if (family == nullptr) return;
  family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  registry.add(name, BenchmarkInfo{"paired", "sparse_vs_full", kDim, threads});

  registry.add_section([=](std::ostream& out, const ReportData& data) {
    using detail::fixed;
    const auto counter = [&](const std::string& counter_name) {
      return detail::find_counter(data.runs, name, kSparsePairedN, counter_name);
    };
    const auto pairs = counter("pairs");
    if (!pairs) return;
    out << "\n## Sparse patterns against full attention, paired: n = " << kSparsePairedN << ", " << threads
        << " threads\n\nFull attention, then each pattern, " << fixed(*pairs, 0)
        << " times in one benchmark; per pair the pattern's GFLOP/s on its attended pairs over full attention's; "
           "median [min, max] (PERF.md's targets).\n\n| target | measured | required | met |\n|---|---|---|---|\n";
    for (const std::string& kind : sparse_pattern_names()) {
      const auto efficiency = counter(kind + "_efficiency");
      if (!efficiency) continue;
      out << "| " << kind << ": GFLOP/s per attended pair / full's | " << fixed(100 * *efficiency, 1) << "% ["
          << fixed(100 * *counter(kind + "_efficiency_min"), 1) << ", "
          << fixed(100 * *counter(kind + "_efficiency_max"), 1) << "] | >= 90% | "
          << (*efficiency >= 0.9 ? "yes" : "NO") << " |\n";
    }
    if (const auto ratio = counter("dilated_over_window")) {
      out << "| dilated_r256_d4 time / window_r256 time | " << fixed(*ratio, 2) << "x | <= 1.05x | "
          << (*ratio <= 1.05 ? "yes" : "NO") << " |\n";
    }
  });
}

}  // namespace attnkit::bench
