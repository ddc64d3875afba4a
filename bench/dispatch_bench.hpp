#pragma once
// Runtime instruction-set dispatch, paired: the kernels a default-flags program gets
// from attnkit::dispatch against this binary's own (-march=native in the bench preset).
//   paired/dispatch/D:64/threads:<T>  n = 4096: full attention by attnkit::attention as this
//       binary was compiled and by attnkit::dispatch::attention, paired for every target this
//       CPU runs; per pair the target's GFLOP/s over this build's (the ratio of times).
// attnkit::dispatch is compiled with its own flags per target (cmake/AttnkitDispatch.cmake),
// whatever flags the program linking it has, so its figures here are a default-flags build's.

#include <benchmark/benchmark.h>

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "attnkit/dispatch.hpp"
#include "bench_support.hpp"
#include "dense_paired_bench.hpp"
#include "report.hpp"

namespace attnkit::bench {

/// The targets: the widest dispatched target at >= 95% of a -march=native build.
inline constexpr double kDispatchTarget = 0.95;
/// Pairs per target (a call of this build and the target's).
inline constexpr int kDispatchRounds = 12;

namespace detail {

/// The "<target>_over_native" counter of each target.
inline std::string over_native(SimdTarget target) { return std::string(simd_target_name(target)) + "_over_native"; }

inline double dispatched_call_seconds(Inputs& in, index_t n, index_t dim, const Options& options) {
  const auto view = [&](auto& buffer) { return bhld(buffer.data(), 1, kHeads, n, dim); };
  const auto start = std::chrono::steady_clock::now();
  dispatch::attention(Full{}, view(in.q), view(in.k), view(in.v), view(in.out), options);
  benchmark::DoNotOptimize(in.out.data());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace detail

/// Registers paired/dispatch on 1 and `threads` threads. Counters: <target>_over_native
/// (median per pair of this build's time over the target's), _min, _max; gflops_native and
/// gflops_<target> (medians); pairs (per target). The label names the default target.
inline void register_dispatch_paired(Registry& registry, int threads) {
  constexpr index_t kDim = 64;
  for (const int team : detail::peak_teams(threads)) {
    const std::string name = "paired/dispatch/D:64/threads:" + std::to_string(team);
    auto* family = register_at(name, sizes(kDensePairedN, kDensePairedN), [=](benchmark::State& state) {
      const index_t n = state.range(0);
      Inputs in(n, kDim);
      const Options options{.threads = team};
      const double flops = Full{}.cost(AttentionShape{1, kHeads, kHeads, n, n, kDim, kDim}).flops;
      const SimdTarget chosen = dispatch::simd_target();
      const std::vector<SimdTarget> targets = dispatch::supported_simd_targets();
      call_seconds(Full{}, in, n, kDim, options);  // warm: scratch, pages
      for (SimdTarget target : targets) {
        dispatch::set_simd_target(target);
        detail::dispatched_call_seconds(in, n, kDim, options);
      }
      std::map<std::string, std::vector<double>> ratios, gflops;
      std::vector<double> native_times;
      for (auto _ : state) {
        // Each target is paired with a call of this build right next to it, the two in turn
        // first (a drift within the pair then favours neither side).
        for (int round = 0; round < kDispatchRounds; ++round) {
          for (SimdTarget target : targets) {
            dispatch::set_simd_target(target);
            double native = 0, dispatched = 0;
            if (round % 2 == 0) {
              native = call_seconds(Full{}, in, n, kDim, options);
              dispatched = detail::dispatched_call_seconds(in, n, kDim, options);
            } else {
              dispatched = detail::dispatched_call_seconds(in, n, kDim, options);
              native = call_seconds(Full{}, in, n, kDim, options);
            }
            native_times.push_back(native);
            gflops["gflops_native"].push_back(flops / native * 1e-9);
            ratios[detail::over_native(target)].push_back(native / dispatched);
            gflops["gflops_" + std::string(simd_target_name(target))].push_back(flops / dispatched * 1e-9);
          }
        }
        state.SetIterationTime(median(native_times));
      }
      dispatch::set_simd_target(chosen);
      for (const auto& [tag, values] : ratios) set_ratio_counters(state, tag, values);
      for (const auto& [tag, values] : gflops) state.counters[tag] = median(values);
      state.counters["pairs"] = kDispatchRounds;
      state.SetLabel("default target " + std::string(simd_target_name(chosen)));
    });
    if (family == nullptr) continue;
    family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
    registry.add(name, BenchmarkInfo{"paired", "dispatch", kDim, team});
  }
}

/// The target rows: the default target over this build, 1 and all threads.
inline void write_dispatch_targets(std::ostream& out, const ReportData& data, int threads) {
  const SimdTarget chosen = dispatch::simd_target();
  for (const int team : detail::peak_teams(threads)) {
    const std::string name = "paired/dispatch/D:64/threads:" + std::to_string(team);
    const std::string tag = detail::over_native(chosen);
    const auto value = detail::find_counter(data.runs, name, kDensePairedN, tag);
    out << "| full, n = " << kDensePairedN << ", D = 64, " << team << (team == 1 ? " thread" : " threads")
        << ": attnkit::dispatch (" << simd_target_name(chosen) << ") over this build, paired | "
        << (value ? detail::ratio_text(*value, *detail::find_counter(data.runs, name, kDensePairedN, tag + "_min"),
                                       *detail::find_counter(data.runs, name, kDensePairedN, tag + "_max"), 100, 1, "%")
                  : "not measured")
        << " | >= " << detail::fixed(100 * kDispatchTarget, 0) << "% | "
        << (value ? (*value >= kDispatchTarget ? "yes" : "NO") : "-") << " |\n";
  }
}

/// Report section: what attnkit::dispatch chose and every target against this build.
inline void write_dispatch_section(std::ostream& out, const ReportData& data, int threads) {
  std::string supported;
  for (SimdTarget target : dispatch::supported_simd_targets()) {
    supported += (supported.empty() ? "" : ", ") + std::string(simd_target_name(target));
  }
  out << "\n## Runtime dispatch (attnkit::dispatch), paired: full attention, n = " << kDensePairedN
      << ", D = 64\n\nattnkit::dispatch runs **" << simd_target_name(dispatch::simd_target())
      << "** here (this CPU runs " << supported << "); this binary's own kernels: " << simd::arch_name()
      << ". Per pair a call of this build and one of the target, in turn first; GFLOP/s medians, ratio = the "
         "target's GFLOP/s over this build's, median [min, max] of "
      << kDispatchRounds
      << " pairs per target.\n\n| threads | target | GFLOP/s | this build's GFLOP/s | over this build |\n"
         "|---|---|---|---|---|\n";
  for (const int team : detail::peak_teams(threads)) {
    const std::string name = "paired/dispatch/D:64/threads:" + std::to_string(team);
    const auto counter = [&](const std::string& tag) {
      return detail::find_counter(data.runs, name, kDensePairedN, tag);
    };
    for (SimdTarget target : dispatch::supported_simd_targets()) {
      const std::string tag = detail::over_native(target);
      const auto ratio = counter(tag);
      if (!ratio) continue;
      out << "| " << team << " | " << simd_target_name(target) << " | "
          << detail::fixed(*counter("gflops_" + std::string(simd_target_name(target))), 1) << " | "
          << detail::fixed(*counter("gflops_native"), 1) << " | "
          << detail::ratio_text(*ratio, *counter(tag + "_min"), *counter(tag + "_max"), 100, 1, "%") << " |\n";
    }
  }
}

}  // namespace attnkit::bench
