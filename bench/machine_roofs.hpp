#pragma once
// Roofs of the machine the benchmark runs on, measured in the same run (PERF.md).

#include <algorithm>
#include <chrono>
#include <cstdint>

#include <omp.h>

#include "attnkit/simd/batch.hpp"

namespace attnkit::bench {

/// Peak fp32 FMA throughput in GFLOP/s with `threads` threads: every thread runs 16
/// independent FMA chains on the widest xsimd batch (enough to cover FMA latency times the
/// FMA ports of current x86 cores), best of `trials` timed runs; simd::fma, the kernels' FMA.
inline double measure_fma_peak_gflops(int threads, int trials = 25) {
  using Batch = simd::Batch<float>;
  constexpr int kChains = 16;
  constexpr std::int64_t kSteps = 1 << 22;
  double best = 0;
  for (int trial = 0; trial < trials; ++trial) {
    float sink = 0;
    const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      Batch acc[kChains];
      for (int c = 0; c < kChains; ++c) acc[c] = Batch(static_cast<float>(c + omp_get_thread_num()) * 1e-3f);
      const Batch scale(0.999999f), shift(1e-7f);
      for (std::int64_t s = 0; s < kSteps; ++s) {
        for (int c = 0; c < kChains; ++c) acc[c] = simd::fma(acc[c], scale, shift);
      }
      Batch total(0.0f);
      for (int c = 0; c < kChains; ++c) total += acc[c];
      sink += xsimd::hadd(total);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double flops = 2.0 * kChains * static_cast<double>(Batch::size) * static_cast<double>(kSteps) * threads;
    if (sink != sink) return 0;  // keeps the chains alive; never true for these inputs
    best = std::max(best, flops / seconds * 1e-9);
  }
  return best;
}

}  // namespace attnkit::bench
