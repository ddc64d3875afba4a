#pragma once
// FFT-RPE benchmarks (issue 10): whole calls of the FFT and direct paths, the transform stage
// alone, and the speedup over full softmax attention measured paired in one benchmark.

#include <benchmark/benchmark.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "attnkit/detail/aligned_buffer.hpp"
#include "bench_support.hpp"

namespace attnkit::bench {

inline constexpr index_t kRpeFeatures[] = {16, 32, 64};

/// The benchmarked pattern: PRF with m features and an unclipped decaying bias table shared
/// by the heads (b_t = -|t| / n: a gentle decay, the regime kAuto sends to the FFT).
inline KernelizedRpe benchmark_rpe(index_t m, index_t n, RpeAlgorithm algorithm) {
  std::vector<float> table(static_cast<std::size_t>(2 * n - 1));
  for (index_t t = -(n - 1); t <= n - 1; ++t) {
    table[static_cast<std::size_t>(t + n - 1)] = -static_cast<float>(std::abs(static_cast<double>(t)) / static_cast<double>(n));
  }
  return KernelizedRpe{.features = m, .bias = RpeBias(n - 1, std::move(table)), .algorithm = algorithm};
}

/// Pairs of the paired benchmark at n (full attention takes ~6 s per call at n = 16384 here).
inline int rpe_pairs(index_t n) { return n <= 4096 ? 7 : n <= 8192 ? 5 : 3; }

/// Registers, for H = 8, D = Dv = 64:
///   attnkit/rpe_fft_m<m>      whole calls on the FFT path, m in {16, 32, 64}, n = 1024 ... max_n
///                             (m = 16 and 64 to 32768: the preset's time)
///   attnkit/rpe_direct_m32    whole calls on the direct path, n <= 8192
///   rpe_transform/lanes       one ToeplitzBatch product (a forward and an inverse complex FFT
///                             of kWidth lanes, length L = 2n) on one thread; GFLOP/s at
///                             5 L log2 L per lane and transform
///   paired/rpe_vs_full        per pair: full attention, then the FFT path for each m;
///                             counters m<m>_speedup (median per-pair ratio) and range
inline void register_rpe_benchmarks(Registry& registry, int threads, index_t max_n) {
  constexpr index_t kDim = 64;
  const Options options{.threads = threads};
  for (const index_t m : kRpeFeatures) {
    const index_t last_n = m == 32 ? max_n : std::min<index_t>(max_n, 32768);
    register_family(registry, "rpe_fft_m" + std::to_string(m), kDim, threads, 1024, last_n, [=](benchmark::State& state) {
      time_pattern(state, benchmark_rpe(m, state.range(0), RpeAlgorithm::kFft), kDim, threads);
    });
  }
  register_family(registry, "rpe_direct_m32", kDim, threads, 1024, std::min<index_t>(max_n, 8192), [=](benchmark::State& state) {
    time_pattern(state, benchmark_rpe(32, state.range(0), RpeAlgorithm::kDirect), kDim, threads);
  });
  register_family(
      registry, "lanes", kDim, 1, 1024, max_n,
      [=](benchmark::State& state) {
        const index_t length = kernel::circulant_length(state.range(0), state.range(0));
        const simd::FftTwiddles<float> twiddles(length);
        const simd::FftTwiddles<double> spectrum_twiddles(length);
        std::vector<double> scratch(static_cast<std::size_t>(2 * length));
        std::vector<float> spectrum(static_cast<std::size_t>(2 * length));
        kernel::circulant_spectrum<float>(state.range(0), state.range(0), [](index_t t) { return std::exp(-0.01 * std::abs(t)); },
                                          spectrum_twiddles, scratch.data(), spectrum.data());
        attnkit::detail::AlignedBuffer<float> data(2 * simd::kWidth<float> * length);
        std::fill(data.data(), data.data() + 2 * simd::kWidth<float> * length, 0.5f);
        const kernel::ToeplitzBatch<float> batch(data.data(), kernel::LaneFftEngine<float>(twiddles));
        for (auto _ : state) {
          batch.transform(spectrum.data(), state.range(0), state.range(0));
          benchmark::DoNotOptimize(data.data());
        }
        const double lanes = static_cast<double>(simd::kWidth<float>);
        finish(state, state.range(0), 2 * lanes * 5 * static_cast<double>(length) * std::log2(static_cast<double>(length)), 1);
      },
      "rpe_transform");

  const std::string paired = "paired/rpe_vs_full/D:64/threads:" + std::to_string(threads);
  auto* family = benchmark::RegisterBenchmark(paired.c_str(), [=](benchmark::State& state) {
    const index_t n = state.range(0);
    Inputs in(n, kDim);
    const auto seconds = [&](const auto& pattern) { return call_seconds(pattern, in, n, kDim, options); };
    std::map<index_t, KernelizedRpe> patterns;
    for (const index_t m : kRpeFeatures) seconds(patterns.emplace(m, benchmark_rpe(m, n, RpeAlgorithm::kFft)).first->second);
    std::vector<double> full_times;
    std::map<index_t, std::vector<double>> times, speedups;
    for (auto _ : state) {
      for (int pair = 0; pair < rpe_pairs(n); ++pair) {
        full_times.push_back(seconds(Full{}));
        for (const index_t m : kRpeFeatures) {
          times[m].push_back(seconds(patterns.at(m)));
          speedups[m].push_back(full_times.back() / times[m].back());
        }
      }
      state.SetIterationTime(median(full_times));
    }
    state.counters["pairs"] = static_cast<double>(full_times.size());
    state.counters["full_s"] = median(full_times);
    for (const index_t m : kRpeFeatures) set_paired_counters(state, "m" + std::to_string(m), times[m], speedups[m]);
  });
  for (index_t n : sizes(1024, std::min<index_t>(max_n, 16384))) family->Arg(n);
  family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  registry.add(paired, BenchmarkInfo{"paired", "rpe_vs_full", kDim, threads});
}

}  // namespace attnkit::bench
