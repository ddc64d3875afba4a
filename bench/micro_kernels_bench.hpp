#pragma once
// The tiled driver's micro-kernels on their own, one thread, on data resident in L1 or L2
//: so that a slow run can be told apart from a slow kernel on any machine. Each is
// reported as GFLOP/s and as a fraction of one core's FMA peak, paired with the FMA probe.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "attnkit/detail/aligned_buffer.hpp"
#include "attnkit/simd/row_ops.hpp"
#include "attnkit/simd/score_tile.hpp"
#include "attnkit/simd/value_accumulate.hpp"
#include "bench_support.hpp"
#include "machine_roofs.hpp"
#include "report.hpp"

namespace attnkit::bench {

/// One query tile's data (the driver's tile shape: 32 rows; `keys` keys; D = Dv = 64),
/// float, filled with small values so that exponentials stay in range.
struct TileData {
  static constexpr index_t kRows = 32, kDim = 64;
  explicit TileData(index_t keys_)
      : keys(keys_), q(kRows * kDim), kt(kDim * keys), v(keys * kDim), s(kRows * keys), o(kRows * kDim), alpha(kRows) {
    const auto fill = [](attnkit::detail::AlignedBuffer<float>& buffer, index_t count, float scale) {
      const std::vector<float>& values = normal_values(static_cast<std::size_t>(count), 11);
      for (index_t e = 0; e < count; ++e) buffer.data()[e] = scale * values[static_cast<std::size_t>(e)];
    };
    fill(q, kRows * kDim, 0.125f);
    fill(kt, kDim * keys, 0.125f);
    fill(v, keys * kDim, 1.0f);
    fill(s, kRows * keys, 1.0f);
    std::fill(o.data(), o.data() + kRows * kDim, 0.0f);
    std::fill(alpha.data(), alpha.data() + kRows, 1.0f);
  }
  index_t keys;
  attnkit::detail::AlignedBuffer<float> q, kt, v, s, o, alpha;
};

/// The driver's softmax step on a score tile: per row the max, 2^(s - max) in place and the
/// row sum (row_max, exp2_shifted_sum).
inline void softmax_rows(TileData& t, float* row_sums) {
  for (index_t r = 0; r < TileData::kRows; ++r) {
    float* row = t.s.data() + r * t.keys;
    row_sums[r] = simd::exp2_shifted_sum(row, t.keys, simd::row_max(row, t.keys));
  }
}

/// Median over `rounds` pairs of (the FMA probe for as many FLOP as `calls` runs of `kernel`,
/// then those runs) of the probe's seconds over the kernel's: the kernel's fraction of the
/// FMA peak, both measured moments apart (PERF.md).
template <class Kernel>
double paired_peak_fraction(Kernel&& kernel, double flops_per_call, int calls, int rounds = 15) {
  const auto steps = static_cast<std::int64_t>(flops_per_call * calls / fma_step_flops());
  std::vector<double> fractions;
  for (int round = 0; round < rounds; ++round) {
    const double probe = fma_chains_seconds(1, steps);
    const auto start = std::chrono::steady_clock::now();
    for (int call = 0; call < calls; ++call) kernel();
    fractions.push_back(probe / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return median(fractions);
}

/// Registers micro/<kernel>/keys:<k> for k = 64 (every operand in a 32 KiB L1) and 256 (the
/// driver's key tile: K^T and V panels of 64 KiB each, in L2), one thread:
///   score        S = Q K^T of a 32-row tile (simd::score_tile), 2 rows keys D FLOP
///   values       O = alpha O + P V (simd::accumulate_values), 2 rows keys Dv FLOP
///   softmax      row max, exp2 and sum per row of S (counted as 3 FLOP per score, exp2 not
///                expanded: a rate, not an FMA count)
///   tile         score, softmax and values in turn: one key tile of the driver's inner loop
///                on resident panels, FLOP as score + values
/// and the report section (GFLOP/s, and for all but softmax the fraction of the FMA peak
/// paired with the probe: counter peak_fraction, from paired_peak_fraction after the timed
/// loop).
inline void register_micro_kernels(Registry& registry) {
  struct Kernel {
    const char* name;
    double flop_per_row_key;  // FLOP per (row, key) of the tile
  };
  const std::vector<Kernel> kernels{{"score", 2.0 * TileData::kDim},
                                    {"values", 2.0 * TileData::kDim},
                                    {"softmax", 3.0},
                                    {"tile", 4.0 * TileData::kDim}};
  for (const Kernel& kernel : kernels) {
    const std::string name = std::string("micro/") + kernel.name + "/D:64/threads:1";
    const std::string which = kernel.name;
    auto* family = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
      TileData t(state.range(0));
      alignas(64) float row_sums[TileData::kRows];
      const auto score = [&] {
        simd::score_tile(t.q.data(), TileData::kDim, t.kt.data(), t.keys, TileData::kRows, t.keys, t.s.data(), t.keys);
      };
      const auto values = [&] {
        simd::accumulate_values<float, simd::ZeroWeights::kMultiply>(
            t.o.data(), TileData::kDim, t.alpha.data(), t.s.data(), t.keys, t.v.data(), TileData::kDim, TileData::kRows,
            t.keys, TileData::kDim / simd::kWidth<float>);
      };
      const bool run_score = which == "score" || which == "tile", run_softmax = which == "softmax" || which == "tile",
                 run_values = which == "values" || which == "tile";
      const auto step = [&] {
        if (run_score) score();
        if (run_softmax) softmax_rows(t, row_sums);
        if (run_values) values();
        benchmark::DoNotOptimize(t.o.data());
        benchmark::DoNotOptimize(t.s.data());
        benchmark::ClobberMemory();
      };
      for (auto _ : state) step();
      const double flops = kernel.flop_per_row_key * TileData::kRows * static_cast<double>(t.keys);
      finish(state, t.keys, flops, 1);
      // About 2 ms of kernel per round (a tile of 256 keys is ~40 us).
      if (which != "softmax") state.counters["peak_fraction"] = paired_peak_fraction(step, flops, 8192 * 64 / t.keys);
    });
    family->Arg(64)->Arg(256)->UseRealTime()->Unit(benchmark::kMicrosecond)->Repetitions(3)->ReportAggregatesOnly();
    registry.add(name, BenchmarkInfo{"micro", kernel.name, TileData::kDim, 1});
  }

  registry.add_section([=](std::ostream& out, const ReportData& data) {
    using detail::fixed;
    out << "\n## Micro-kernels alone: one thread, a 32-row query tile, D = Dv = 64\n\n"
           "keys = 64: every operand in L1 (32 KiB here); keys = 256: the driver's key tile, K^T and V panels of 64 "
           "KiB "
           "(L2). softmax counts 3 FLOP per score (a rate, exp2 not expanded); tile = score + softmax + values, FLOP "
           "of score and values. GFLOP/s: median of the repetitions; % of the FMA peak: median of 15 pairs (the probe "
           "for as many FLOP, then the kernel).\n\n| kernel | keys | GFLOP/s | % of the 1-thread FMA peak, paired |\n"
           "|---|---|---|---|\n";
    for (const Kernel& kernel : kernels) {
      for (const index_t keys : {index_t{64}, index_t{256}}) {
        const std::string name = std::string("micro/") + kernel.name + "/D:64/threads:1";
        const Point* p = detail::find_point(data.points, name, keys);
        if (p == nullptr) continue;
        const auto fraction = detail::find_counter(data.runs, name, keys, "peak_fraction");
        out << "| " << kernel.name << " | " << keys << " | " << fixed(p->gflops(), 1) << " | "
            << (fraction ? fixed(100 * *fraction, 1) + "%" : "-") << " |\n";
      }
    }
  });
}

}  // namespace attnkit::bench
