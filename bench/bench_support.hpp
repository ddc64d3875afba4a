#pragma once
// What every benchmark family of attnkit_bench shares: inputs, counters, registration.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "report.hpp"

namespace attnkit::bench {

inline constexpr index_t kHeads = 8;

/// `count` N(0, 1) floats drawn from seed `seed`, drawn once per (count, seed) in a run and
/// kept: Google Benchmark calls a benchmark's body once per probed iteration count and
/// repetition, and drawing the three [8, 65536, 64] inputs takes ~1.8 s, more than most of the
/// calls it would feed. (About 1.5 GB over every size of the bench preset.)
inline const std::vector<float>& normal_values(std::size_t count, unsigned seed) {
  static std::map<std::pair<std::size_t, unsigned>, std::vector<float>> drawn;
  std::vector<float>& values = drawn[{count, seed}];
  if (values.size() != count) {
    values.resize(count);
    std::mt19937 generator(seed);
    std::normal_distribution<float> normal;
    for (float& x : values) x = normal(generator);
  }
  return values;
}

/// [H, n, D] float inputs, N(0, 1), fixed seeds (shared by every benchmark of the same shape),
/// and an output of the same shape.
struct Inputs {
  Inputs(index_t n, index_t dim)
      : q(normal_values(static_cast<std::size_t>(kHeads * n * dim), 42)),
        k(normal_values(q.size(), 43)),
        v(normal_values(q.size(), 44)),
        out(q.size()) {}
  const std::vector<float>& q;
  const std::vector<float>& k;
  const std::vector<float>& v;
  std::vector<float> out;
};

/// Median of a copy (the paired benchmarks' per-pair ratios).
inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t m = values.size() / 2;
  return values.size() % 2 == 1 ? values[m] : 0.5 * (values[m - 1] + values[m]);
}

/// Median, min and max of per-pair ratios as counters <tag>, <tag>_min, <tag>_max.
inline void set_ratio_counters(benchmark::State& state, const std::string& tag, const std::vector<double>& ratios) {
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  state.counters[tag] = median(ratios);
  state.counters[tag + "_min"] = *lo;
  state.counters[tag + "_max"] = *hi;
}

/// Counters of one side of a paired benchmark (its calls alternating with full attention's):
/// <tag>_s (median seconds), <tag>_speedup (median per-pair ratio), _speedup_min, _speedup_max.
inline void set_paired_counters(benchmark::State& state, const std::string& tag, const std::vector<double>& seconds,
                                const std::vector<double>& speedups) {
  state.counters[tag + "_s"] = median(seconds);
  set_ratio_counters(state, tag + "_speedup", speedups);
}

/// The n range of the run (attnkit_bench's --attnkit_min_n and --attnkit_max_n), set by main
/// before any family is registered: no family runs outside it.
struct SizeRange {
  index_t min_n = 1;
  index_t max_n = std::numeric_limits<index_t>::max() / 4;
};
inline SizeRange g_size_range;

/// n = first, step first, step^2 first, ... up to last, inside g_size_range.
inline std::vector<index_t> sizes(index_t first, index_t last, index_t step = 2) {
  std::vector<index_t> result;
  for (index_t n = first; n <= std::min(last, g_size_range.max_n); n *= step)
    if (n >= g_size_range.min_n) result.push_back(n);
  return result;
}

/// Registers benchmark `name` running `body` at each n of `ns`, or nothing (nullptr) when the
/// n range leaves `ns` empty (a family without arguments would run without an n).
template <class Body>
benchmark::internal::Benchmark* register_at(const std::string& name, const std::vector<index_t>& ns, Body body) {
  if (ns.empty()) return nullptr;
  auto* family = benchmark::RegisterBenchmark(name.c_str(), body);
  for (index_t n : ns) family->Arg(n);
  return family;
}

/// FMA peak (GFLOP/s) by thread count, measured in main before any benchmark runs.
inline Roofs g_roofs;

/// Counters of one run: GFLOP/s, % of the FMA peak of `threads` threads (both as rates over
/// real time), the FLOP per call and n for the complexity fit.
inline void finish(benchmark::State& state, index_t n, double flops, int threads) {
  state.SetComplexityN(n);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  const auto peak = g_roofs.fma_peak_gflops.find(threads);
  if (peak != g_roofs.fma_peak_gflops.end()) {
    state.counters["%peak"] =
        benchmark::Counter(100.0 * flops * 1e-9 / peak->second, benchmark::Counter::kIsIterationInvariantRate);
  }
  state.counters["flop"] = flops;
}

/// Wall seconds of one attnkit::attention call with `pattern` on `in` (B = 1, H = 8, n rows,
/// D = Dv = dim): one side of a paired benchmark.
template <class Pattern>
double call_seconds(const Pattern& pattern, Inputs& in, index_t n, index_t dim, const Options& options) {
  const auto view = [&](auto& buffer) { return bhld(buffer.data(), 1, kHeads, n, dim); };
  const auto start = std::chrono::steady_clock::now();
  attention(pattern, view(in.q), view(in.k), view(in.v), view(in.out), options);
  benchmark::DoNotOptimize(in.out.data());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Times attnkit::attention with `pattern` at n = state.range(0) (B = 1, H = 8, D = Dv = dim).
template <class Pattern>
void time_pattern(benchmark::State& state, const Pattern& pattern, index_t dim, int threads) {
  const index_t n = state.range(0);
  Inputs in(n, dim);
  const Options options{.threads = threads};
  const auto view = [&](auto& buffer) { return bhld(buffer.data(), 1, kHeads, n, dim); };
  for (auto _ : state) {
    attention(pattern, view(in.q), view(in.k), view(in.v), view(in.out), options);
    benchmark::DoNotOptimize(in.out.data());
  }
  const AttentionShape shape{1, kHeads, kHeads, n, n, dim, dim};
  finish(state, n, pattern.cost(shape).flops, threads);
}

/// A family of runs at n = first_n, 2 first_n, ..., max_n inside g_size_range (median of 3
/// repetitions).
template <class Body>
void register_family(Registry& registry, const std::string& kind, index_t dim, int threads, index_t first_n,
                     index_t max_n, Body body, const std::string& implementation = "attnkit") {
  const std::string name =
      implementation + "/" + kind + "/D:" + std::to_string(dim) + "/threads:" + std::to_string(threads);
  auto* family = register_at(name, sizes(first_n, max_n), body);
  if (family == nullptr) return;
  family->UseRealTime()
      ->Unit(benchmark::kMillisecond)
      ->Complexity(benchmark::oAuto)
      ->Repetitions(3)
      ->ReportAggregatesOnly();
  registry.add(name, BenchmarkInfo{implementation, kind, dim, threads});
}

}  // namespace attnkit::bench
