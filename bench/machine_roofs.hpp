#pragma once
// Roofs of the machine the benchmark runs on, measured in the same run (PERF.md).

#include <algorithm>
#include <chrono>
#include <cstdint>

#include <omp.h>

#include "attnkit/simd/batch.hpp"

namespace attnkit::bench {

/// FLOP of one fma_chains_seconds step on one thread: 16 chains, one FMA on a batch each.
inline constexpr int kFmaChains = 16;
inline double fma_step_flops() { return 2.0 * kFmaChains * static_cast<double>(simd::Batch<float>::size); }

/// Wall seconds of `steps` steps of kFmaChains independent FMA chains on the widest xsimd batch
/// on each of `threads` threads (enough chains to cover FMA latency times the FMA ports of
/// current x86 cores); simd::fma, the kernels' FMA.
inline double fma_chains_seconds(int threads, std::int64_t steps) {
  using Batch = simd::Batch<float>;
  float sink = 0;
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    Batch acc[kFmaChains];
    for (int c = 0; c < kFmaChains; ++c) acc[c] = Batch(static_cast<float>(c + omp_get_thread_num()) * 1e-3f);
    const Batch scale(0.999999f), shift(1e-7f);
    for (std::int64_t s = 0; s < steps; ++s) {
      for (int c = 0; c < kFmaChains; ++c) acc[c] = simd::fma(acc[c], scale, shift);
    }
    Batch total(0.0f);
    for (int c = 0; c < kFmaChains; ++c) total += acc[c];
    sink += xsimd::hadd(total);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sink != sink ? 0 : seconds;  // keeps the chains alive; never NaN for these inputs
}

/// Peak fp32 FMA throughput in GFLOP/s with `threads` threads (fma_chains_seconds), best of
/// `trials` timed runs: the start-of-run roof of the report's tables.
inline double measure_fma_peak_gflops(int threads, int trials = 25) {
  constexpr std::int64_t kSteps = 1 << 22;
  double best = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const double seconds = fma_chains_seconds(threads, kSteps);
    if (seconds <= 0) return 0;
    best = std::max(best, fma_step_flops() * static_cast<double>(kSteps) * threads / seconds * 1e-9);
  }
  return best;
}

}  // namespace attnkit::bench
