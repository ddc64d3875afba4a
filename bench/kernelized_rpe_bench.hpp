#pragma once
// FFT-RPE benchmarks: whole calls of the FFT and direct paths, the transform stage
// alone, and the speedup over full softmax attention measured paired in one benchmark.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "attnkit/detail/aligned_buffer.hpp"
#include "bench_support.hpp"

namespace attnkit::bench {

inline constexpr index_t kRpeFeatures[] = {16, 32, 64};

/// The benchmarked pattern: PRF with m features and an unclipped decaying bias table shared
/// by the heads (b_t = -|t| / n: a gentle decay, the regime kAuto sends to the FFT).
inline KernelizedRpe benchmark_rpe(index_t m, index_t n, RpeAlgorithm algorithm, RpeFft fft = RpeFft::kLanes) {
  std::vector<float> table(static_cast<std::size_t>(2 * n - 1));
  for (index_t t = -(n - 1); t <= n - 1; ++t) {
    table[static_cast<std::size_t>(t + n - 1)] =
        -static_cast<float>(std::abs(static_cast<double>(t)) / static_cast<double>(n));
  }
  return KernelizedRpe{.features = m, .bias = RpeBias(n - 1, std::move(table)), .algorithm = algorithm, .fft = fft};
}

/// The FFT engines of this build with their counter tags: lanes (attnkit's, the default),
/// eigen, and fftw where the build has ATTNKIT_FFTW (the bench preset does).
inline std::vector<std::pair<RpeFft, std::string>> rpe_engines() {
  std::vector<std::pair<RpeFft, std::string>> engines{{RpeFft::kLanes, "lanes"}, {RpeFft::kEigen, "eigen"}};
  if (kernel::kHaveFftw) engines.emplace_back(RpeFft::kFftw, "fftw");
  return engines;
}

/// Rounds of the interleaved scaling benchmark (one round: ~7 s at max_n = 65536).
inline constexpr int kScalingRounds = 5;

/// Pairs of the paired benchmark at n (full attention takes ~6 s per call at n = 16384 here).
inline int rpe_pairs(index_t n) { return n <= 4096 ? 7 : n <= 8192 ? 5 : 3; }

/// One engine's Toeplitz product of a batch (2 W real columns of length n, L = 2n) on the
/// calling thread: the transform stage of the FFT path alone.
class TransformProbe {
 public:
  TransformProbe(RpeFft engine, index_t n)
      : engine_(engine),
        n_(n),
        length_(kernel::circulant_length(n, n)),
        twiddles_(length_),
        spectrum_(static_cast<std::size_t>(2 * length_)),
        data_(2 * simd::kWidth<float> * length_) {
    const simd::FftTwiddles<double> spectrum_twiddles(length_);
    std::vector<double> scratch(static_cast<std::size_t>(2 * length_));
    kernel::circulant_spectrum<float>(
        n, n, [](index_t t) { return std::exp(-0.01 * std::abs(static_cast<double>(t))); }, spectrum_twiddles,
        scratch.data(), spectrum_.data(), engine != RpeFft::kLanes);
#if defined(ATTNKIT_WITH_FFTW)
    if (engine == RpeFft::kFftw) fftw_.emplace(length_);
#endif
    run();  // plans and warms
  }
  void run() {
    std::fill(data_.data(), data_.data() + 2 * simd::kWidth<float> * n_, 0.5f);
    switch (engine_) {
      case RpeFft::kLanes:
        transform(kernel::LaneFftEngine<float>(twiddles_));
        return;
      case RpeFft::kEigen:
        transform(kernel::EigenFftEngine<float>(length_));
        return;
      case RpeFft::kFftw:
#if defined(ATTNKIT_WITH_FFTW)
        transform(*fftw_);
#endif
        return;
    }
  }
  /// 5 L log2 L per lane and direction (the complex-FFT convention).
  double flops() const {
    const double length = static_cast<double>(length_);
    return 2 * static_cast<double>(simd::kWidth<float>) * 5 * length * std::log2(length);
  }

 private:
  template <class Engine>
  void transform(const Engine& engine) {
    kernel::ToeplitzBatch<float, Engine>(data_.data(), engine).transform(spectrum_.data(), n_, n_);
    benchmark::DoNotOptimize(data_.data());
  }
  RpeFft engine_;
  index_t n_, length_;
  simd::FftTwiddles<float> twiddles_;
  std::vector<float> spectrum_;
  attnkit::detail::AlignedBuffer<float> data_;
#if defined(ATTNKIT_WITH_FFTW)
  std::optional<kernel::FftwEngine<float>> fftw_;
#endif
};

/// The report's FFT-RPE section: whole calls and paired speedups over full attention for each
/// engine and m, the crossovers, the transform stage by engine, and the targets.
inline void write_rpe_section(std::ostream& out, const ReportData& data, int threads, index_t max_n) {
  using detail::fixed;
  const std::string suffix = "/D:64/threads:" + std::to_string(threads);
  const std::string paired = "paired/rpe_vs_full" + suffix, transforms = "paired/rpe_transforms/D:64/threads:1";
  const auto speedup = [&](index_t n, const std::string& tag) {
    return detail::find_counter(data.runs, paired, n, tag + "_speedup");
  };
  const auto tag_of = [](RpeFft engine, const std::string& name, index_t m) {
    return (engine == RpeFft::kLanes ? "" : name + "_") + "m" + std::to_string(m);
  };
  const std::vector<index_t> paired_sizes = sizes(1024, std::min<index_t>(max_n, 16384));
  out << "\n## FFT-RPE: H = 8, D = Dv = 64, PRF, unclipped bias b_t = -|t| / n, " << threads << " threads\n\n"
      << "Speedup over full softmax attention: paired in one benchmark (full, then the FFT path for each engine and m "
         "in "
         "turn), median of the per-pair ratios [min, max] of pairs.\n\n| n | m | FFT path, lanes (ms) |";
  for (const auto& [engine, name] : rpe_engines()) out << " " << name << ": speedup over full |";
  out << "\n|---|---|---|";
  for (std::size_t column = 0; column < rpe_engines().size(); ++column) out << "---|";
  out << "\n";
  for (index_t n : paired_sizes) {
    for (const index_t m : kRpeFeatures) {
      const Point* call = detail::find_point(data.points, "attnkit/rpe_fft_m" + std::to_string(m) + suffix, n);
      out << "| " << n << " | " << m << " | " << (call ? fixed(call->seconds * 1e3, 1) : "-") << " |";
      for (const auto& [engine, name] : rpe_engines())
        out << " " << detail::paired_speedup(data.runs, paired, n, tag_of(engine, name, m)) << " |";
      out << "\n";
    }
  }
  out << "\nCrossover (the smallest paired n from which every larger paired n has speedup > 1):\n\n| engine | m | "
         "crossover n |\n|---|---|---|\n";
  for (const auto& [engine, name] : rpe_engines()) {
    for (const index_t m : kRpeFeatures) {
      std::optional<index_t> crossover;
      for (auto n = paired_sizes.rbegin(); n != paired_sizes.rend(); ++n) {
        const auto x = speedup(*n, tag_of(engine, name, m));
        if (!x || *x <= 1) break;
        crossover = *n;
      }
      out << "| " << name << " | " << m << " | "
          << (crossover ? std::to_string(*crossover) : "none up to " + std::to_string(paired_sizes.back())) << " |\n";
    }
  }
  out << "\nThe transform stage alone: one Toeplitz product of a batch (" << simd::kWidth<float>
      << " complex lanes, L = 2n) on one thread, each engine in turn per pair; GFLOP/s at 5 L log2 L per lane and "
         "direction; lanes' speedup over the engine, median per pair.\n\n| n |";
  for (const auto& [engine, name] : rpe_engines()) out << " " << name << " GFLOP/s |";
  for (const auto& [engine, name] : rpe_engines())
    if (engine != RpeFft::kLanes) out << " lanes over " << name << " |";
  out << "\n|---|";
  for (std::size_t column = 0; column + 1 < 2 * rpe_engines().size(); ++column) out << "---|";
  out << "\n";
  for (index_t n : sizes(1024, max_n)) {
    out << "| " << n << " |";
    for (const auto& [engine, name] : rpe_engines()) {
      const auto rate = detail::find_counter(data.runs, transforms, n, name + "_GFLOPs");
      out << " " << (rate ? fixed(*rate, 1) : "-") << " |";
    }
    for (const auto& [engine, name] : rpe_engines()) {
      if (engine == RpeFft::kLanes) continue;
      const auto ratio = detail::find_counter(data.runs, transforms, n, name + "_speedup");
      out << " " << (ratio ? fixed(*ratio, 2) + "x" : "-") << " |";
    }
    out << "\n";
  }
  out << "\n| target | measured | required | met |\n|---|---|---|---|\n";
  const std::string scaling = "paired/rpe_scaling_m32" + suffix;
  if (const auto exponent = detail::find_counter(data.runs, scaling, max_n, "exponent")) {
    const auto lo = detail::find_counter(data.runs, scaling, max_n, "exponent_min");
    const auto hi = detail::find_counter(data.runs, scaling, max_n, "exponent_max");
    out << "| FFT path, m = 32: fitted complexity, n = 4096 ... " << max_n << ", sizes interleaved (medians of "
        << kScalingRounds << " rounds; single rounds " << fixed(lo.value_or(0), 2) << " ... "
        << fixed(hi.value_or(0), 2) << ") | O(n^" << fixed(*exponent, 2) << ") | exponent <= 1.20 | "
        << (*exponent <= 1.2 ? "yes" : "NO") << " |\n";
  }
  if (const auto points = data.points.find("attnkit/rpe_fft_m32" + suffix); points != data.points.end()) {
    if (const auto exponent = detail::fitted_exponent(points->second, 4096)) {
      out << "| FFT path, m = 32: fitted complexity, n = 4096 ... " << max_n << ", one family per size (drift "
          << "included) | " << detail::exponent_text(*exponent) << " | (for comparison) | - |\n";
    }
  }
  for (index_t n : paired_sizes) {
    if (n < 8192) continue;
    if (const auto x = speedup(n, "m32")) {
      out << "| FFT path (lanes), m = 32, n = " << n << ": speedup over full, paired | " << fixed(*x, 2) << "x | > 1 | "
          << (*x > 1 ? "yes" : "NO") << " |\n";
    }
  }
}

/// Registers, for H = 8, D = Dv = 64:
///   attnkit/rpe_fft_m<m>      whole calls on the FFT path, m in {16, 32, 64}, n = 1024 ... max_n
///                             (m = 16 and 64 to 32768: the preset's time)
///   attnkit/rpe_direct_m32    whole calls on the direct path, n <= 8192
///   rpe_transform/lanes       one ToeplitzBatch product (a forward and an inverse complex FFT
///                             of kWidth lanes, length L = 2n) on one thread; GFLOP/s at
///                             5 L log2 L per lane and transform
///   paired/rpe_transforms     per pair: the same product by each engine (lanes, eigen, fftw);
///                             counters <engine>_GFLOPs and <engine>_speedup, lanes' speedup
///                             over that engine (median per-pair ratio)
///   paired/rpe_vs_full        per pair: full attention, then the FFT path for each engine and
///                             m; counters m<m>_speedup (lanes) and <engine>_m<m>_speedup
///   paired/rpe_scaling_m32    at max_n: rounds of the FFT path (m = 32) at every n = 4096 ...
///                             max_n in turn; counters n<n>_s (medians), exponent (their fit),
///                             exponent_min, exponent_max (fits of single rounds)
inline void register_rpe_benchmarks(Registry& registry, int threads, index_t max_n) {
  constexpr index_t kDim = 64;
  const Options options{.threads = threads};
  for (const index_t m : kRpeFeatures) {
    const index_t last_n = m == 32 ? max_n : std::min<index_t>(max_n, 32768);
    register_family(registry, "rpe_fft_m" + std::to_string(m), kDim, threads, 1024, last_n,
                    [=](benchmark::State& state) {
                      time_pattern(state, benchmark_rpe(m, state.range(0), RpeAlgorithm::kFft), kDim, threads);
                    });
  }
  register_family(registry, "rpe_direct_m32", kDim, threads, 1024, std::min<index_t>(max_n, 8192),
                  [=](benchmark::State& state) {
                    time_pattern(state, benchmark_rpe(32, state.range(0), RpeAlgorithm::kDirect), kDim, threads);
                  });
  register_family(
      registry, "lanes", kDim, 1, 1024, max_n,
      [=](benchmark::State& state) {
        TransformProbe probe(RpeFft::kLanes, state.range(0));
        for (auto _ : state) probe.run();
        finish(state, state.range(0), probe.flops(), 1);
      },
      "rpe_transform");

  const std::string transforms = "paired/rpe_transforms/D:64/threads:1";
  auto* transform_family = register_at(transforms, sizes(1024, max_n), [=](benchmark::State& state) {
    const index_t n = state.range(0);
    const auto engines = rpe_engines();
    std::vector<TransformProbe> probes;
    for (const auto& [engine, tag] : engines) probes.emplace_back(engine, n);
    std::map<std::string, std::vector<double>> times, speedups;
    const int pairs = n <= 8192 ? 15 : 7;
    for (auto _ : state) {
      for (int pair = 0; pair < pairs; ++pair) {
        for (std::size_t e = 0; e < probes.size(); ++e) {
          const auto start = std::chrono::steady_clock::now();
          probes[e].run();
          const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          times[engines[e].second].push_back(seconds);
        }
        for (const auto& [engine, tag] : engines) speedups[tag].push_back(times[tag].back() / times["lanes"].back());
      }
      state.SetIterationTime(median(times["lanes"]));
    }
    state.counters["pairs"] = pairs;
    for (const auto& [engine, tag] : engines) {
      set_paired_counters(state, tag, times[tag], speedups[tag]);
      state.counters[tag + "_GFLOPs"] = probes.front().flops() / median(times[tag]) / 1e9;
    }
  });
  if (transform_family != nullptr) transform_family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  registry.add(transforms, BenchmarkInfo{"paired", "rpe_transforms", kDim, 1});

  const std::string paired = "paired/rpe_vs_full/D:64/threads:" + std::to_string(threads);
  auto* family = register_at(paired, sizes(1024, std::min<index_t>(max_n, 16384)), [=](benchmark::State& state) {
    const index_t n = state.range(0);
    Inputs in(n, kDim);
    const auto seconds = [&](const auto& pattern) { return call_seconds(pattern, in, n, kDim, options); };
    // Tags: m<m> for the default engine (lanes), <engine>_m<m> for the others.
    std::map<std::string, KernelizedRpe> patterns;
    for (const auto& [engine, name] : rpe_engines())
      for (const index_t m : kRpeFeatures) {
        const std::string tag = (engine == RpeFft::kLanes ? "" : name + "_") + "m" + std::to_string(m);
        seconds(patterns.emplace(tag, benchmark_rpe(m, n, RpeAlgorithm::kFft, engine)).first->second);
      }
    std::vector<double> full_times;
    std::map<std::string, std::vector<double>> times, speedups;
    for (auto _ : state) {
      for (int pair = 0; pair < rpe_pairs(n); ++pair) {
        full_times.push_back(seconds(Full{}));
        for (const auto& [tag, pattern] : patterns) {
          times[tag].push_back(seconds(pattern));
          speedups[tag].push_back(full_times.back() / times[tag].back());
        }
      }
      state.SetIterationTime(median(full_times));
    }
    state.counters["pairs"] = static_cast<double>(full_times.size());
    state.counters["full_s"] = median(full_times);
    for (const auto& [tag, pattern] : patterns) set_paired_counters(state, tag, times[tag], speedups[tag]);
  });
  if (family != nullptr) family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  registry.add(paired, BenchmarkInfo{"paired", "rpe_vs_full", kDim, threads});

  // The exponent with the sizes interleaved: each round calls the FFT path at every n = 4096,
  // 8192, ..., max_n in turn, so the machine's drift over minutes falls on every size alike
  // (a family per size, as above, times n = 4096 minutes before n = 65536); the fit takes each
  // size's median over the rounds, and exponent_min / _max the fits of single rounds. Needs
  // max_n >= 8192 (two sizes).
  const std::string scaling = "paired/rpe_scaling_m32/D:64/threads:" + std::to_string(threads);
  auto* scaling_family =
      register_at(scaling, sizes(std::max<index_t>(max_n, 8192), max_n), [=](benchmark::State& state) {
        const std::vector<index_t> ns = sizes(4096, state.range(0));
        Inputs in(ns.back(), kDim);  // each size's call reads a prefix
        std::vector<KernelizedRpe> patterns;
        for (const index_t n : ns) patterns.push_back(benchmark_rpe(32, n, RpeAlgorithm::kFft));
        std::vector<std::vector<double>> times(ns.size());
        std::vector<double> round_exponents;
        const auto fit = [&](const auto& seconds_of) {
          std::vector<Point> points;
          for (std::size_t i = 0; i < ns.size(); ++i) points.push_back(Point{.n = ns[i], .seconds = seconds_of(i)});
          const auto exponent = detail::fitted_exponent(points, 4096);
          return exponent ? exponent->value : 0.0;
        };
        for (std::size_t i = 0; i < ns.size(); ++i) call_seconds(patterns[i], in, ns[i], kDim, options);  // warm-up
        for (auto _ : state) {
          for (int round = 0; round < kScalingRounds; ++round) {
            for (std::size_t i = 0; i < ns.size(); ++i)
              times[i].push_back(call_seconds(patterns[i], in, ns[i], kDim, options));
            round_exponents.push_back(fit([&](std::size_t i) { return times[i].back(); }));
          }
          state.SetIterationTime(median(times.back()));
        }
        for (std::size_t i = 0; i < ns.size(); ++i)
          state.counters["n" + std::to_string(ns[i]) + "_s"] = median(times[i]);
        const auto [lo, hi] = std::minmax_element(round_exponents.begin(), round_exponents.end());
        state.counters["rounds"] = kScalingRounds;
        state.counters["exponent"] = fit([&](std::size_t i) { return median(times[i]); });
        state.counters["exponent_min"] = *lo;
        state.counters["exponent_max"] = *hi;
      });
  if (scaling_family != nullptr) scaling_family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  registry.add(scaling, BenchmarkInfo{"paired", "rpe_scaling_m32", kDim, threads});

  registry.add_section(
      [=](std::ostream& out, const ReportData& data) { write_rpe_section(out, data, threads, max_n); });
}

}  // namespace attnkit::bench
