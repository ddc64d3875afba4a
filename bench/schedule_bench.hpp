#pragma once
// MASFormer schedule benchmark: the attention of a whole layer stack, per layer,
// so that the schedule sits in the all-kinds table next to single calls of the other kinds.

#include <benchmark/benchmark.h>

#include <string>

#include "attnkit/attnkit.hpp"
#include "bench_support.hpp"

namespace attnkit::bench {

inline constexpr index_t kScheduleLayers = 4;      // layers of the benchmarked stack
inline constexpr index_t kScheduleFullLayers = 1;  // causal full attention in the bottom one
inline constexpr index_t kScheduleBlock = 512;     // causal block attention in the others

/// The benchmarked schedule at n: Schedule::masformer(4, 1, causal blocks of 512), the same
/// share of full layers as examples/masformer's default (3 of 12), in a third of the time.
inline Schedule benchmark_schedule(index_t n) {
  return Schedule::masformer(
      kScheduleLayers, kScheduleFullLayers,
      BlockSparse::local(kScheduleBlock, attnkit::detail::ceil_div(n, kScheduleBlock), /*causal=*/true));
}

/// Registers attnkit/masformer_f1of4_b512, n = 1024 ... max_n (median of 3 repetitions): one
/// attnkit::attention call per layer of benchmark_schedule(n) on the same inputs, timed
/// together; the time and FLOP reported are the stack's over its 4 layers (the mean layer), so
/// that the schedule compares with one call of every other kind.
inline void register_schedule_benchmarks(Registry& registry, int threads, index_t max_n) {
  constexpr index_t kDim = 64;
  const std::string kind = "masformer_f" + std::to_string(kScheduleFullLayers) + "of" +
                           std::to_string(kScheduleLayers) + "_b" + std::to_string(kScheduleBlock);
  const std::string name = "attnkit/" + kind + "/D:64/threads:" + std::to_string(threads);
  auto* family = register_at(name, sizes(1024, max_n), [=](benchmark::State& state) {
    const index_t n = state.range(0);
    const Schedule schedule = benchmark_schedule(n);
    Inputs in(n, kDim);
    const Options options{.threads = threads};
    const auto layers = static_cast<double>(schedule.layers());
    for (auto _ : state) {
      double stack_seconds = 0;
      for (index_t layer = 0; layer < schedule.layers(); ++layer) {
        stack_seconds += call_seconds(schedule.at(layer), in, n, kDim, options);
      }
      state.SetIterationTime(stack_seconds / layers);
    }
    finish(state, n, schedule.cost({1, kHeads, kHeads, n, n, kDim, kDim}).total.flops / layers, threads);
  });
  if (family == nullptr) return;
  family->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Complexity(benchmark::oAuto)
      ->Repetitions(3)
      ->ReportAggregatesOnly();
  registry.add(name, BenchmarkInfo{"attnkit", kind, kDim, threads});
}

}  // namespace attnkit::bench
