#pragma once
// Half precision, paired: every kind on bfloat16 and on float16 q, k, v (out of the
// same type) against the same call on float, the three calls alternating in one process.
//   paired/half/<kind>/D:<d>/threads:<t>  n = 4096 (full: 1024 ... 16384, D = 64 and 128),
//       B = 1, H = 8; counters bf16_over_float and fp16_over_float: per round, the float
//       call's time over the half call's (the half call's GFLOP/s as a fraction of the float
//       call's), median with _min and _max; gflops_float, gflops_bf16, gflops_fp16 (medians).
// The report's "Half precision" section adds the machine's bf16 dot-product roof beside its
// FMA roof: vdpbf16ps (AVX512-BF16) measured like the FMA probe where cpuid reports it, and
// what cpuid reports otherwise.

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <omp.h>

#include "attnkit/attnkit.hpp"
#include "attnkit/simd/cpu_features.hpp"
#include "bench_patterns.hpp"
#include "bench_support.hpp"
#include "dense_paired_bench.hpp"
#include "kernelized_rpe_bench.hpp"
#include "linformer_bench.hpp"
#include "lsh_bench.hpp"
#include "machine_roofs.hpp"
#include "report.hpp"

namespace attnkit::bench {

/// The targets: half full attention at >= 95% of the float call's GFLOP/s, every
/// other kind at >= 90%.
inline constexpr double kHalfFullTarget = 0.95;
inline constexpr double kHalfKindTarget = 0.90;
inline constexpr index_t kHalfPairedN = 4096;

/// The kinds of the section: full attention, the sparse benchmark patterns (bench_patterns.hpp),
/// Linformer (kp = 256), LSH (R = 2) and kernelized RPE (m = 64, direct), as their own
/// benchmarks configure them.
inline const std::vector<std::string>& half_kind_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all{"full"};
    for (const std::string& name : sparse_pattern_names()) all.push_back(name);
    for (const char* name : {"linformer_kp256", "lsh_r2", "rpe_m64"}) all.push_back(name);
    return all;
  }();
  return names;
}

/// Calls f(pattern) with the kind `name` for sequence length n.
template <class F>
void with_half_kind(const std::string& name, index_t n, F&& f) {
  if (name == "full") return f(Full{});
  if (name == "linformer_kp256") return f(benchmark_linformer(256, n));
  if (name == "lsh_r2") return f(benchmark_lsh(2));
  if (name == "rpe_m64") return f(benchmark_rpe(64, n, RpeAlgorithm::kDirect));
  with_sparse_pattern(name, n, f);
}

namespace detail {

/// Inputs of one shape in float and rounded to bfloat16 and float16, with an output of each.
struct HalfInputs {
  HalfInputs(index_t n, index_t dim) : wide(n, dim) {
    for (const std::vector<float>* source : {&wide.q, &wide.k, &wide.v}) {
      bf16.emplace_back(source->size());
      fp16.emplace_back(source->size());
      for (std::size_t i = 0; i < source->size(); ++i) {
        bf16.back()[i] = to_bfloat16((*source)[i]);
        fp16.back()[i] = to_float16((*source)[i]);
      }
    }
    bf16.emplace_back(wide.out.size());
    fp16.emplace_back(wide.out.size());
  }
  Inputs wide;
  std::vector<std::vector<bfloat16>> bf16;  // q, k, v, out
  std::vector<std::vector<float16>> fp16;
};

/// Seconds of one call on the half inputs of type E (k is q for LSH, which shares them).
template <class E, class Pattern>
double half_call_seconds(const Pattern& pattern, std::vector<std::vector<E>>& in, index_t n, index_t dim,
                         const Options& options) {
  const auto view = [&](std::size_t i) { return bhld(static_cast<const E*>(in[i].data()), 1, kHeads, n, dim); };
  const bool shared = std::is_same_v<Pattern, Lsh>;
  const auto start = std::chrono::steady_clock::now();
  attention(pattern, view(0), view(shared ? 0 : 1), view(2), bhld(in[3].data(), 1, kHeads, n, dim), options);
  benchmark::DoNotOptimize(in[3].data());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Seconds of the float call (k is q for LSH).
template <class Pattern>
double float_call_seconds(const Pattern& pattern, Inputs& in, index_t n, index_t dim, const Options& options) {
  const auto view = [&](const std::vector<float>& buffer) { return bhld(buffer.data(), 1, kHeads, n, dim); };
  const bool shared = std::is_same_v<Pattern, Lsh>;
  const auto start = std::chrono::steady_clock::now();
  attention(pattern, view(in.q), view(shared ? in.q : in.k), view(in.v), bhld(in.out.data(), 1, kHeads, n, dim),
            options);
  benchmark::DoNotOptimize(in.out.data());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Rounds of the three calls: fewer for the long full calls.
inline int half_rounds(index_t n) { return n <= 4096 ? 9 : n <= 8192 ? 5 : 3; }

inline std::string half_family(const std::string& kind, index_t dim, int threads) {
  return "paired/half/" + kind + "/D:" + std::to_string(dim) + "/threads:" + std::to_string(threads);
}

}  // namespace detail

/// The bf16 dot-product roof: what cpuid reports, and (with AVX512-BF16) vdpbf16ps throughput
/// in GFLOP/s (2 FLOP per bf16 product) on 1 and `threads` threads, best of several runs.
struct Bf16Roof {
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
  std::map<int, double> gflops;  // empty without AVX512-BF16
};

#if defined(__x86_64__)
/// `steps` steps of kFmaChains independent vdpbf16ps chains on zmm registers, like
/// fma_chains_seconds; returns their sum (keeps them alive). Compiled for AVX512-BF16 whatever
/// the build's flags, called only where cpuid reports it; no vector crosses its signature, so
/// callers (an OpenMP region) need no such flags.
__attribute__((target("avx512f,avx512bf16"))) inline float bf16_dot_chains(std::int64_t steps, int thread) {
  __m512 acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c + thread) * 1e-3f);
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3F80), b = (__m512bh)_mm512_set1_epi16(0x3380);
  for (std::int64_t s = 0; s < steps; ++s) {
    for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  __m512 total = _mm512_setzero_ps();
  for (int c = 0; c < kFmaChains; ++c) total = _mm512_add_ps(total, acc[c]);
  alignas(64) float lanes[16];  // (_mm512_reduce_add_ps trips GCC 12's -Wuninitialized)
  _mm512_store_ps(lanes, total);
  float sum = 0;
  for (float lane : lanes) sum += lane;
  return sum;
}

/// Wall seconds of bf16_dot_chains on each of `threads` threads.
inline double bf16_dot_chains_seconds(int threads, std::int64_t steps) {
  float sink = 0;
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  sink += bf16_dot_chains(steps, omp_get_thread_num());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sink != sink ? 0 : seconds;
}
#endif

inline Bf16Roof measure_bf16_roof(int threads) {
  Bf16Roof roof;
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0) roof.avx512_bf16 = (eax >> 5) & 1u;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0) roof.amx_bf16 = (edx >> 22) & 1u;
  roof.avx512_bf16 = roof.avx512_bf16 && simd::detect_cpu_levels().x86_64_v4;  // OS-enabled zmm
  if (!roof.avx512_bf16) return roof;
  constexpr std::int64_t kSteps = 1 << 22;
  for (const int team : {1, threads}) {
    double best = 0;
    for (int trial = 0; trial < 25; ++trial) {
      const double seconds = bf16_dot_chains_seconds(team, kSteps);
      // Per step and chain: 32 bf16 products, 2 FLOP each.
      if (seconds > 0)
        best = std::max(best, 2.0 * 32 * kFmaChains * static_cast<double>(kSteps) * team / seconds * 1e-9);
    }
    roof.gflops[team] = best;
  }
#else
  (void)threads;
#endif
  return roof;
}

/// The roof measured at the start of the run (main).
inline Bf16Roof g_bf16_roof;

/// f(team, kind, dim) for every family of the section: each kind at D = 64, full also at
/// D = 128, on 1 and `threads` threads.
template <class F>
void for_each_half_family(int threads, F&& f) {
  for (const int team : detail::peak_teams(threads))
    for (const std::string& kind : half_kind_names())
      for (const index_t dim : {index_t{64}, index_t{128}})
        if (kind == "full" || dim == 64) f(team, kind, dim);
}

/// Registers paired/half for every kind at n = 4096 (full: 1024 ... 16384 at D = 64 and
/// D = 128) on 1 and `threads` threads.
inline void register_half_paired(Registry& registry, int threads, index_t max_n) {
  for_each_half_family(threads, [&](int team, const std::string& kind, index_t dim) {
    const bool full = kind == "full";
    const std::string name = detail::half_family(kind, dim, team);
    const std::vector<index_t> ns =
        full ? sizes(1024, std::min<index_t>(max_n, 16384)) : sizes(kHalfPairedN, kHalfPairedN);
    auto* family = register_at(name, ns, [=](benchmark::State& state) {
      const index_t n = state.range(0);
      detail::HalfInputs in(n, dim);
      const Options options{.threads = team};
      with_half_kind(kind, n, [&](const auto& pattern) {
        const double flops = pattern.cost(AttentionShape{1, kHeads, kHeads, n, n, dim, dim}).flops;
        const auto wide = [&] { return detail::float_call_seconds(pattern, in.wide, n, dim, options); };
        const auto bf16 = [&] { return detail::half_call_seconds(pattern, in.bf16, n, dim, options); };
        const auto fp16 = [&] { return detail::half_call_seconds(pattern, in.fp16, n, dim, options); };
        wide(), bf16(), fp16();  // warm: scratch, pages
        std::vector<double> float_times, bf16_ratio, fp16_ratio, gflops_float, gflops_bf16, gflops_fp16;
        for (auto _ : state) {
          for (int round = 0; round < detail::half_rounds(n); ++round) {
            // The float call first in even rounds and last in odd ones, so a drift within a
            // round favours no side.
            double t_float = 0, t_bf16 = 0, t_fp16 = 0;
            if (round % 2 == 0) {
              t_float = wide(), t_bf16 = bf16(), t_fp16 = fp16();
            } else {
              t_fp16 = fp16(), t_bf16 = bf16(), t_float = wide();
            }
            float_times.push_back(t_float);
            bf16_ratio.push_back(t_float / t_bf16);
            fp16_ratio.push_back(t_float / t_fp16);
            gflops_float.push_back(flops / t_float * 1e-9);
            gflops_bf16.push_back(flops / t_bf16 * 1e-9);
            gflops_fp16.push_back(flops / t_fp16 * 1e-9);
          }
          state.SetIterationTime(median(float_times));
        }
        set_ratio_counters(state, "bf16_over_float", bf16_ratio);
        set_ratio_counters(state, "fp16_over_float", fp16_ratio);
        state.counters["gflops_float"] = median(gflops_float);
        state.counters["gflops_bf16"] = median(gflops_bf16);
        state.counters["gflops_fp16"] = median(gflops_fp16);
        state.counters["rounds"] = detail::half_rounds(n);
      });
    });
    if (family == nullptr) return;
    family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
    registry.add(name, BenchmarkInfo{"paired", "half/" + kind, dim, team});
  });
}

namespace detail {
inline std::string half_ratio_cell(const ReportData& data, const std::string& name, index_t n, const std::string& tag) {
  const auto value = find_counter(data.runs, name, n, tag);
  if (!value) return "not measured";
  return ratio_text(*value, *find_counter(data.runs, name, n, tag + "_min"),
                    *find_counter(data.runs, name, n, tag + "_max"), 100, 1, "%");
}
}  // namespace detail

/// The target rows: every kind at n = 4096 (full at D = 64 and 128), bfloat16 and
/// float16 over float, 1 and all threads.
inline void write_half_targets(std::ostream& out, const ReportData& data, int threads) {
  for_each_half_family(threads, [&](int team, const std::string& kind, index_t dim) {
    const bool full = kind == "full";
    const std::string name = detail::half_family(kind, dim, team);
    const double target = full ? kHalfFullTarget : kHalfKindTarget;
    for (const char* type : {"bf16", "fp16"}) {
      const std::string tag = std::string(type) + "_over_float";
      const auto value = detail::find_counter(data.runs, name, kHalfPairedN, tag);
      out << "| " << kind << ", n = " << kHalfPairedN << ", D = " << dim << ", " << team
          << (team == 1 ? " thread" : " threads") << ": " << type << " over float, paired | "
          << detail::half_ratio_cell(data, name, kHalfPairedN, tag) << " | >= " << detail::fixed(100 * target, 0)
          << "% | " << (value ? (*value >= target ? "yes" : "NO") : "-") << " |\n";
    }
  });
}

/// Report section: the bf16 roof beside the FMA roof, and every kind's half calls against its
/// float call (GFLOP/s and paired ratios), full attention by n.
inline void write_half_section(std::ostream& out, const ReportData& data, int threads) {
  out << "## Half precision\n\n"
      << "q, k, v (and out) in bfloat16 and in float16 against the same call in float, the three calls "
         "alternating (bench/half_precision_bench.hpp). Half values widen to float as tiles are packed; "
         "scores, softmax and accumulation run in float.\n\n";
  const Bf16Roof& roof = g_bf16_roof;
  out << "bf16 dot-product roof: ";
  if (roof.gflops.empty()) {
    out << "not measured: cpuid reports no AVX512-BF16" << (roof.amx_bf16 ? " (AMX-BF16 present)" : "")
        << ", so no bf16 score kernel applies on this CPU;";
  } else {
    for (const auto& [team, gflops] : roof.gflops) out << detail::fixed(gflops, 1) << " GFLOP/s (" << team << " t) ";
  }
  out << " FMA roof:";
  for (const auto& [team, gflops] : data.roofs.fma_peak_gflops)
    out << " " << detail::fixed(gflops, 1) << " GFLOP/s (" << team << " t)";
  out << ".\n\n| kind | D | threads | n | GFLOP/s float | bf16 | fp16 | bf16 / float | fp16 / float |\n"
      << "|---|---|---|---|---|---|---|---|---|\n";
  for_each_half_family(threads, [&](int team, const std::string& kind, index_t dim) {
    const std::string name = detail::half_family(kind, dim, team);
    for (const index_t n : {index_t{1024}, index_t{2048}, index_t{4096}, index_t{8192}, index_t{16384}}) {
      const auto gflops_float = detail::find_counter(data.runs, name, n, "gflops_float");
      if (!gflops_float) continue;
      out << "| " << kind << " | " << dim << " | " << team << " | " << n << " | " << detail::fixed(*gflops_float, 1)
          << " | " << detail::fixed(*detail::find_counter(data.runs, name, n, "gflops_bf16"), 1) << " | "
          << detail::fixed(*detail::find_counter(data.runs, name, n, "gflops_fp16"), 1) << " | "
          << detail::half_ratio_cell(data, name, n, "bf16_over_float") << " | "
          << detail::half_ratio_cell(data, name, n, "fp16_over_float") << " |\n";
    }
  });
  out << "\n";
}

}  // namespace attnkit::bench
