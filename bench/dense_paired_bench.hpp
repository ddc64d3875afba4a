#pragma once
// Full attention's ratios, paired (PERF.md): every "% of peak" and "X over Y" figure
// of the report's targets compares calls made seconds apart inside one benchmark, not a
// family's median with a roof or another family measured minutes earlier on a machine whose
// speed drifts by 10-30% within minutes.
//   paired/fma_peak/D:<D>/threads:<T>  n = 4096: the FMA probe (machine_roofs.hpp) for as many
//       FLOP as the call, then the call; per pair the call's GFLOP/s over the probe's.
//   paired/dense_ratios/D:64/threads:<all>  n = 4096: full attention on all threads, on one
//       thread, causal attention, the naive Eigen baseline; per pair the ratios of their times.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "attnkit/attnkit.hpp"
#include "attnkit/eigen.hpp"
#include "bench_support.hpp"
#include "machine_roofs.hpp"
#include "naive_attention.hpp"
#include "report.hpp"

namespace attnkit::bench {

inline constexpr index_t kDensePairedN = 4096;
inline constexpr int kDensePairs = 7;
/// Head dims of the % of peak table: the common heads of today's models.
inline const std::vector<index_t>& peak_paired_dims() {
  static const std::vector<index_t> dims{32, 64, 80, 96, 128};
  return dims;
}
/// The targets for full attention at n = 4096, D = 64 and 128, on 1 and all threads.
inline constexpr double kPeakTarget = 0.75;

namespace detail {

/// 1 and `threads` (once when they are equal): the thread counts of the peak rows.
inline std::vector<int> peak_teams(int threads) {
  return threads == 1 ? std::vector<int>{1} : std::vector<int>{1, threads};
}

/// "m% [lo, hi]" or "m x [lo, hi]" of a ratio's counters.
inline std::string ratio_text(double value, double lo, double hi, double scale, int digits, const std::string& unit) {
  return fixed(scale * value, digits) + unit + " [" + fixed(scale * lo, digits) + ", " + fixed(scale * hi, digits) +
         "]";
}

}  // namespace detail

/// Registers paired/fma_peak for every dim of peak_paired_dims() on 1 and `threads` threads.
/// Counters: peak_fraction (median per pair of the call's GFLOP/s over the probe's), _min,
/// _max; gflops and probe_gflops (medians); pairs.
inline void register_peak_paired(Registry& registry, int threads) {
  for (const index_t dim : peak_paired_dims()) {
    for (const int team : detail::peak_teams(threads)) {
      const std::string name = "paired/fma_peak/D:" + std::to_string(dim) + "/threads:" + std::to_string(team);
      auto* family = register_at(name, sizes(kDensePairedN, kDensePairedN), [=](benchmark::State& state) {
        const index_t n = state.range(0);
        Inputs in(n, dim);
        const Options options{.threads = team};
        const double flops = Full{}.cost(AttentionShape{1, kHeads, kHeads, n, n, dim, dim}).flops;
        // The probe does the call's FLOP, split over the team: both sides last about as long.
        const auto steps = static_cast<std::int64_t>(flops / team / fma_step_flops());
        call_seconds(Full{}, in, n, dim, options);  // warm: scratch, pages
        std::vector<double> fractions, gflops, probe_gflops, call_times;
        for (auto _ : state) {
          for (int pair = 0; pair < kDensePairs; ++pair) {
            const double probe = fma_chains_seconds(team, steps);
            const double call = call_seconds(Full{}, in, n, dim, options);
            call_times.push_back(call);
            fractions.push_back(probe / call);
            gflops.push_back(flops / call * 1e-9);
            probe_gflops.push_back(fma_step_flops() * static_cast<double>(steps) * team / probe * 1e-9);
          }
          state.SetIterationTime(median(call_times));
        }
        set_ratio_counters(state, "peak_fraction", fractions);
        state.counters["gflops"] = median(gflops);
        state.counters["probe_gflops"] = median(probe_gflops);
        state.counters["pairs"] = static_cast<double>(fractions.size());
      });
      if (family == nullptr) continue;
      family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
      registry.add(name, BenchmarkInfo{"paired", "fma_peak", dim, team});
    }
  }
}

/// Registers paired/dense_ratios (D = 64, n = 4096). Counters: threads_speedup (t_one /
/// t_all), causal_speedup (t_full / t_causal), naive_speedup (t_naive / t_full), each with
/// _min and _max; pairs.
inline void register_dense_ratios(Registry& registry, int threads) {
  constexpr index_t kDim = 64;
  const std::string name = "paired/dense_ratios/D:64/threads:" + std::to_string(threads);
  auto* family = register_at(name, sizes(kDensePairedN, kDensePairedN), [=](benchmark::State& state) {
    const index_t n = state.range(0);
    Inputs in(n, kDim);
    const Options all{.threads = threads}, one{.threads = 1};
    RowMatrix<float> scores(n, n);
    Eigen::setNbThreads(threads);
    const auto naive_seconds = [&] {
      const auto start = std::chrono::steady_clock::now();
      naive_eigen_attention(in.q.data(), in.k.data(), in.v.data(), in.out.data(), kHeads, n, kDim, false, scores);
      benchmark::DoNotOptimize(in.out.data());
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    call_seconds(Full{}, in, n, kDim, all);  // warm: scratch, pages
    naive_seconds();
    std::map<std::string, std::vector<double>> ratios;
    std::vector<double> full_times;
    for (auto _ : state) {
      for (int pair = 0; pair < kDensePairs; ++pair) {
        const double full = call_seconds(Full{}, in, n, kDim, all);
        const double single = call_seconds(Full{}, in, n, kDim, one);
        const double causal = call_seconds(Full{.causal = true}, in, n, kDim, all);
        const double naive = naive_seconds();
        full_times.push_back(full);
        ratios["threads_speedup"].push_back(single / full);
        ratios["causal_speedup"].push_back(full / causal);
        ratios["naive_speedup"].push_back(naive / full);
      }
      state.SetIterationTime(median(full_times));
    }
    for (const auto& [tag, values] : ratios) set_ratio_counters(state, tag, values);
    state.counters["pairs"] = static_cast<double>(full_times.size());
  });
  if (family == nullptr) return;
  family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  registry.add(name, BenchmarkInfo{"paired", "dense_ratios", kDim, threads});
}

/// The targets of full attention at n = 4096 from the paired benchmarks above, as rows of the
/// report's targets table, and the section with every head dim's % of peak.
inline void write_dense_paired_targets(std::ostream& out, const ReportData& data, int threads) {
  const auto counter = [&](const std::string& name, const std::string& counter_name) {
    return detail::find_counter(data.runs, name, kDensePairedN, counter_name);
  };
  const auto peak_name = [](index_t dim, int team) {
    return "paired/fma_peak/D:" + std::to_string(dim) + "/threads:" + std::to_string(team);
  };
  for (const index_t dim : {index_t{64}, index_t{128}}) {
    for (const int team : detail::peak_teams(threads)) {
      const std::string name = peak_name(dim, team);
      const auto fraction = counter(name, "peak_fraction");
      out << "| full, D = " << dim << ", " << team << (team == 1 ? " thread" : " threads")
          << ": % of the FMA peak, paired with the probe | "
          << (fraction ? detail::ratio_text(*fraction, *counter(name, "peak_fraction_min"),
                                            *counter(name, "peak_fraction_max"), 100, 1, "%")
                       : "not measured")
          << " | >= " << detail::fixed(100 * kPeakTarget, 0) << "% | "
          << (fraction ? (*fraction >= kPeakTarget ? "yes" : "NO") : "-") << " |\n";
    }
  }
  const std::string ratios = "paired/dense_ratios/D:64/threads:" + std::to_string(threads);
  struct Row {
    std::string what, tag;
    double required;
  };
  const std::vector<Row> rows{
      {"full, " + std::to_string(threads) + " threads: speedup over naive Eigen", "naive_speedup", 5},
      {"full: " + std::to_string(threads) + " threads over 1 thread", "threads_speedup", 1.8},
      {"causal speedup over full (" + std::to_string(threads) + " threads)", "causal_speedup", 1.7}};
  for (const Row& row : rows) {
    const auto value = counter(ratios, row.tag);
    out << "| " << row.what << ", paired | "
        << (value ? detail::ratio_text(*value, *counter(ratios, row.tag + "_min"), *counter(ratios, row.tag + "_max"),
                                       1, 2, "x")
                  : "not measured")
        << " | >= " << detail::fixed(row.required, 2) << "x | "
        << (value ? (*value >= row.required ? "yes" : "NO") : "-") << " |\n";
  }
}

/// Report section: % of the FMA peak for every head dim of peak_paired_dims().
inline void write_peak_section(std::ostream& out, const ReportData& data, int threads) {
  out << "\n## Full attention against the FMA peak, paired: n = " << kDensePairedN
      << "\n\nPer pair the FMA probe for as many FLOP as the call, then the call; the call's GFLOP/s over the "
         "probe's, median [min, max] of "
      << kDensePairs
      << " pairs. GFLOP/s: medians.\n\n| D | threads | GFLOP/s | probe GFLOP/s | % of the FMA peak |\n"
         "|---|---|---|---|---|\n";
  for (const index_t dim : peak_paired_dims()) {
    for (const int team : detail::peak_teams(threads)) {
      const std::string name = "paired/fma_peak/D:" + std::to_string(dim) + "/threads:" + std::to_string(team);
      const auto counter = [&](const std::string& counter_name) {
        return detail::find_counter(data.runs, name, kDensePairedN, counter_name);
      };
      const auto fraction = counter("peak_fraction");
      if (!fraction) continue;
      out << "| " << dim << " | " << team << " | " << detail::fixed(*counter("gflops"), 1) << " | "
          << detail::fixed(*counter("probe_gflops"), 1) << " | "
          << detail::ratio_text(*fraction, *counter("peak_fraction_min"), *counter("peak_fraction_max"), 100, 1, "%")
          << " |\n";
    }
  }
}

}  // namespace attnkit::bench
