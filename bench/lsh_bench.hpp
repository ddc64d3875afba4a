#pragma once
// Reformer LSH benchmarks: whole calls for R in {1, 2, 4, 8}, the time split into
// hashing, sorting, attention and merge, hashing with and without factorized buckets, the
// speedup over full attention and the chunk attention's efficiency measured paired in one
// benchmark, the two public checkpoint configurations, and the report section.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "attnkit/kernel/lse_merge.hpp"
#include "attnkit/kernel/lsh_plan.hpp"
#include "bench_support.hpp"
#include "report.hpp"

namespace attnkit::bench {

inline constexpr index_t kLshRounds[] = {1, 2, 4, 8};

/// The benchmarked LSH: chunk 64, one chunk before, the automatic bucket rule (factorized
/// from n = 8192 on), R rounds.
inline Lsh benchmark_lsh(index_t rounds) { return Lsh{.rounds = rounds, .seed = 2020}; }

/// [heads, n, dim] float inputs x (queries and keys) and v, N(0, 1) (normal_values), and the
/// output.
struct LshInputs {
  LshInputs(index_t heads_, index_t n_, index_t dim_)
      : heads(heads_),
        n(n_),
        dim(dim_),
        x(normal_values(static_cast<std::size_t>(heads * n * dim), 7)),
        v(normal_values(x.size(), 8)),
        out(x.size()) {}
  TensorView<const float> view(const std::vector<float>& buffer) const { return bhld(buffer.data(), 1, heads, n, dim); }
  AttentionShape shape() const { return {1, heads, heads, n, n, dim, dim}; }
  /// attention(lsh, x, x, v, out), returning its wall time in seconds.
  double call(const Lsh& lsh, int threads) {
    const auto start = std::chrono::steady_clock::now();
    attention(lsh, view(x), view(x), view(v), bhld(out.data(), 1, heads, n, dim), Options{.threads = threads});
    benchmark::DoNotOptimize(out.data());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  /// The same call through its plan with the phases timed (one extra barrier per phase).
  kernel::LshPhaseTimes phases(const Lsh& lsh, int threads) {
    const AttentionShape s = shape();
    const AttentionCall<float> call{s,
                                    view(x),
                                    view(x),
                                    view(v),
                                    bhld(out.data(), 1, heads, n, dim),
                                    nullptr,
                                    static_cast<float>(1 / std::sqrt(static_cast<double>(dim))),
                                    parallel::resolve_threads(threads, Full{}.cost(s).flops)};
    kernel::LshPhaseTimes times;
    lsh.plan(call, TileShape{}).execute(call, &times);
    benchmark::DoNotOptimize(out.data());
    return times;
  }

  index_t heads, n, dim;
  const std::vector<float>& x;
  const std::vector<float>& v;
  std::vector<float> out;
};

/// Pairs of the paired benchmark at n (full attention takes seconds per call from n = 16384).
inline int lsh_pairs(index_t n) { return n <= 8192 ? 7 : 5; }

/// The merge of the rounds as the driver's sink does it, timed alone: for rounds 1 .. R - 1
/// every row's round result (in the round's sorted order, a random permutation here) folded
/// into its output row by kernel::merge_partial; H heads, Dv = dim.
inline void time_merge(benchmark::State& state, index_t rounds, index_t dim) {
  const index_t n = state.range(0);
  std::vector<float> out(static_cast<std::size_t>(n * dim), 1.0f), lse(static_cast<std::size_t>(n), 0.5f);
  std::vector<float> rows(static_cast<std::size_t>(kHeads * n * dim), 2.0f);
  std::vector<std::int32_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(3));
  for (auto _ : state) {
    for (index_t h = 0; h < kHeads; ++h)
      for (index_t r = 1; r < rounds; ++r)
        for (index_t t = 0; t < n; ++t) {
          const index_t i = order[static_cast<std::size_t>(t)];
          lse[static_cast<std::size_t>(i)] = kernel::merge_partial(
              out.data() + i * dim, lse[static_cast<std::size_t>(i)], rows.data() + (h * n + t) * dim, 0.25f, dim);
        }
    benchmark::DoNotOptimize(out.data());
  }
  finish(state, n, 3.0 * static_cast<double>(kHeads * (rounds - 1) * n * dim), 1);
}

/// Registers, for H = 8, D = Dv = 64, chunk 64, n = 1024 ... max_n:
///   attnkit/lsh_r<R>                 whole calls, R in {1, 2, 4, 8}
///   lsh_phases/r<R>                  the same calls with counters hashing_ms, sorting_ms,
///                                    attention_ms (the attention passes and their streamed merge)
///   lsh_merge/r<R>                   the merge alone (one thread, as each sink merges its rows)
///   lsh_hash/automatic, unfactorized Lsh::hash at R = 2: the default rule (factorized from
///                                    n = 8192) and one plain count 2^floor(log2(2n/c))
///   paired/lsh_vs_full               per pair: full, then each R (plain and timed calls) in turn;
///                                    counters: per-pair speedups and chunk-attention efficiency
///   lsh_checkpoint/enwik8, crime     the public checkpoints' configurations (below)
/// and the report section.
inline void register_lsh_benchmarks(Registry& registry, int threads, index_t max_n) {
  constexpr index_t kDim = 64;
  const std::string suffix = "/D:64/threads:" + std::to_string(threads);
  for (const index_t rounds : kLshRounds) {
    const std::string kind = "lsh_r" + std::to_string(rounds);
    register_family(registry, kind, kDim, threads, 1024, max_n, [=](benchmark::State& state) {
      LshInputs in(kHeads, state.range(0), kDim);
      for (auto _ : state) in.call(benchmark_lsh(rounds), threads);
      finish(state, in.n, benchmark_lsh(rounds).cost(in.shape()).flops, threads);
    });
  }
  for (const index_t rounds : kLshRounds) {
    register_family(
        registry, "r" + std::to_string(rounds), kDim, threads, 1024, max_n,
        [=](benchmark::State& state) {
          LshInputs in(kHeads, state.range(0), kDim);
          kernel::LshPhaseTimes total;
          for (auto _ : state) {
            const kernel::LshPhaseTimes times = in.phases(benchmark_lsh(rounds), threads);
            total.hashing += times.hashing, total.sorting += times.sorting, total.attention += times.attention;
          }
          const auto per_call_ms = [&](double seconds) {
            return benchmark::Counter(seconds * 1e3, benchmark::Counter::kAvgIterations);
          };
          state.counters["hashing_ms"] = per_call_ms(total.hashing);
          state.counters["sorting_ms"] = per_call_ms(total.sorting);
          state.counters["attention_ms"] = per_call_ms(total.attention);
          finish(state, in.n, benchmark_lsh(rounds).cost(in.shape()).flops, threads);
        },
        "lsh_phases");
    if (rounds > 1) {
      register_family(
          registry, "r" + std::to_string(rounds), kDim, 1, 1024, max_n,
          [=](benchmark::State& state) { time_merge(state, rounds, kDim); }, "lsh_merge");
    }
  }
  for (const bool factorized : {true, false}) {
    register_family(
        registry, factorized ? "automatic" : "unfactorized", kDim, threads, 1024, max_n,
        [=](benchmark::State& state) {
          LshInputs in(kHeads, state.range(0), kDim);
          Lsh lsh = benchmark_lsh(2);
          if (!factorized)
            lsh.buckets = Lsh{.max_positions = std::numeric_limits<index_t>::max() / 2}.bucket_factors(in.n)[0];
          for (auto _ : state) benchmark::DoNotOptimize(lsh.hash<float>(in.view(in.x), Options{.threads = threads}));
          finish(state, in.n, lsh.cost(in.shape()).extra_flops, threads);
        },
        "lsh_hash");
  }

  const std::string paired = "paired/lsh_vs_full" + suffix;
  auto* family = register_at(paired, sizes(1024, std::min<index_t>(max_n, 16384)), [=](benchmark::State& state) {
    LshInputs in(kHeads, state.range(0), kDim);
    const Options options{.threads = threads};
    const auto full_seconds = [&] {
      const auto start = std::chrono::steady_clock::now();
      attention(Full{}, in.view(in.x), in.view(in.x), in.view(in.v), bhld(in.out.data(), 1, kHeads, in.n, kDim),
                options);
      benchmark::DoNotOptimize(in.out.data());
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    for (const index_t rounds : kLshRounds) in.call(benchmark_lsh(rounds), threads);  // warm: scratch, pages
    const double full_flops = Full{}.cost(in.shape()).flops;
    std::vector<double> full_times;
    std::map<index_t, std::vector<double>> times, speedups, efficiencies;
    for (auto _ : state) {
      for (int pair = 0; pair < lsh_pairs(in.n); ++pair) {
        full_times.push_back(full_seconds());
        for (const index_t rounds : kLshRounds) {
          const Lsh lsh = benchmark_lsh(rounds);
          times[rounds].push_back(in.call(lsh, threads));
          speedups[rounds].push_back(full_times.back() / times[rounds].back());
          // GFLOP/s per attended slot pair of the attention passes over full attention's.
          const double attention_rate = lsh.cost(in.shape()).attention_flops() / in.phases(lsh, threads).attention;
          efficiencies[rounds].push_back(attention_rate / (full_flops / full_times.back()));
        }
      }
      state.SetIterationTime(median(full_times));
    }
    state.counters["pairs"] = static_cast<double>(full_times.size());
    state.counters["full_s"] = median(full_times);
    for (const index_t rounds : kLshRounds) {
      const std::string tag = "r" + std::to_string(rounds);
      set_paired_counters(state, tag, times[rounds], speedups[rounds]);
      state.counters[tag + "_efficiency"] = median(efficiencies[rounds]);
    }
    state.counters["flop"] = full_flops;
  });
  if (family != nullptr) family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  registry.add(paired, BenchmarkInfo{"paired", "lsh_vs_full", kDim, threads});

  // The public Reformer checkpoints' LSH layers (their Hugging Face configs; causal LMs with
  // one chunk before and none after): google/reformer-enwik8 (8 heads of 128, chunk 256,
  // 4 hashes, 512 buckets, 65536 positions) and google/reformer-crime-and-punishment (2 heads
  // of 64, chunk 64, 1 hash, buckets [64, 128], 524288 positions).
  struct Checkpoint {
    const char* name;
    index_t heads, dim, first_n, last_n;
    Lsh lsh;
  };
  const std::vector<Checkpoint> checkpoints{
      {"enwik8", 8, 128, 16384, 65536, Lsh{.chunk = 256, .rounds = 4, .buckets = 512, .causal = true}},
      {"crime_and_punishment", 2, 64, 131072, 524288,
       Lsh{.chunk = 64, .rounds = 1, .buckets = {64, 128}, .causal = true}}};
  for (const Checkpoint& checkpoint : checkpoints) {
    const std::string name = "lsh_checkpoint/" + std::string(checkpoint.name) + "/D:" + std::to_string(checkpoint.dim) +
                             "/threads:" + std::to_string(threads);
    auto* runs = register_at(name, sizes(checkpoint.first_n, checkpoint.last_n, 4), [=](benchmark::State& state) {
      LshInputs in(checkpoint.heads, state.range(0), checkpoint.dim);
      for (auto _ : state) in.call(checkpoint.lsh, threads);
      finish(state, in.n, checkpoint.lsh.cost(in.shape()).flops, threads);
    });
    if (runs != nullptr) runs->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(3)->ReportAggregatesOnly();
    registry.add(name, BenchmarkInfo{"lsh_checkpoint", checkpoint.name, checkpoint.dim, threads});
  }

  registry.add_section([=](std::ostream& out, const ReportData& data) {
    using detail::fixed;
    const auto at = [&](const std::string& name, index_t n) { return detail::find_point(data.points, name, n); };
    const auto counter = [&](const std::string& function, index_t n, const std::string& name) {
      return detail::find_counter(data.runs, function, n, name);
    };
    const auto ms = [](std::optional<double> value) { return value ? fixed(*value, 2) : std::string("-"); };
    out << "\n## Reformer LSH: H = 8, D = Dv = 64, chunk 64, one chunk before, " << threads
        << " threads, automatic buckets\n\n"
        << "Whole calls (attnkit/lsh_r<R>); the split from the same calls timed by phase (lsh_phases/r<R>, the "
           "attention passes include the rounds' merge, streamed in the driver's sink; the merge alone from "
           "lsh_merge/r<R> on one thread, as each sink merges its own rows); the speedup over full attention and the "
           "chunk attention's GFLOP/s per attended slot pair over full attention's, paired in one benchmark (median of "
           "the per-pair ratios).\n\n"
        << "| n | R | buckets | call (ms) | hashing (ms) | sorting (ms) | attention + merge (ms) | merge alone (ms) | "
           "GFLOP/s (cost()) | speedup over full, paired | chunk attention / full, per slot pair |\n"
        << "|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (index_t n : sizes(1024, max_n)) {
      for (const index_t rounds : kLshRounds) {
        const std::string tag = "r" + std::to_string(rounds);
        const Point* call = at("attnkit/lsh_" + tag + suffix, n);
        const std::string phases = "lsh_phases/" + tag + suffix;
        const Point* merge = rounds > 1 ? at("lsh_merge/" + tag + "/D:64/threads:1", n) : nullptr;
        const auto efficiency = counter(paired, n, tag + "_efficiency");
        std::string factors;
        for (index_t f : benchmark_lsh(rounds).bucket_factors(n))
          factors += (factors.empty() ? "" : " x ") + std::to_string(f);
        out << "| " << n << " | " << rounds << " | " << factors << " | " << (call ? fixed(call->seconds * 1e3, 2) : "-")
            << " | " << ms(counter(phases, n, "hashing_ms")) << " | " << ms(counter(phases, n, "sorting_ms")) << " | "
            << ms(counter(phases, n, "attention_ms")) << " | " << (merge ? fixed(merge->seconds * 1e3, 2) : "-")
            << " | " << (call ? fixed(call->gflops(), 1) : "-") << " | "
            << detail::paired_speedup(data.runs, paired, n, tag) << " | "
            << (efficiency ? fixed(100 * *efficiency, 1) + "%" : "-") << " |\n";
      }
    }
    out << "\nHashing alone (Lsh::hash, R = 2): the automatic rule factorizes the count from n = 8192 on "
           "(columns ~ sqrt(n / c)), a plain count 2^floor(log2(2n/c)) needs n / c columns, so its GEMM grows like "
           "n^2 / c.\n\n| n | automatic (ms) | plain count (ms) |\n|---|---|---|\n";
    for (index_t n : sizes(1024, max_n)) {
      const Point* automatic = at("lsh_hash/automatic" + suffix, n);
      const Point* plain = at("lsh_hash/unfactorized" + suffix, n);
      out << "| " << n << " | " << (automatic ? fixed(automatic->seconds * 1e3, 2) : "-") << " | "
          << (plain ? fixed(plain->seconds * 1e3, 2) : "-") << " |\n";
    }
    out << "\nPublic checkpoint configurations (causal):\n\n| configuration | H | D | n | call (ms) | GFLOP/s (cost()) "
           "|\n"
        << "|---|---|---|---|---|---|\n";
    for (const auto& [name, points] : data.points) {
      if (name.rfind("lsh_checkpoint/", 0) != 0) continue;
      for (const Point& p : points) {
        out << "| " << name << " | " << (name.find("enwik8") != std::string::npos ? "8" : "2") << " | "
            << (name.find("enwik8") != std::string::npos ? "128" : "64") << " | " << p.n << " | "
            << fixed(p.seconds * 1e3, 1) << " | " << fixed(p.gflops(), 1) << " |\n";
      }
    }
    out << "\n| target | measured | required | met |\n|---|---|---|---|\n";
    if (const auto speedup = counter(paired, 16384, "r2_speedup")) {
      out << "| LSH R = 2, c = 64, n = 16384: speedup over full, paired | " << fixed(*speedup, 1) << "x | >= 20x | "
          << (*speedup >= 20 ? "yes" : "NO") << " |\n";
    }
    if (const auto efficiency = counter(paired, 16384, "r2_efficiency")) {
      out << "| LSH R = 2, n = 16384: chunk attention GFLOP/s per slot pair / full's, paired | "
          << fixed(100 * *efficiency, 1) << "% | >= 60% | " << (*efficiency >= 0.6 ? "yes" : "NO") << " |\n";
    }
    for (const index_t rounds : kLshRounds) {
      const auto points = data.points.find("attnkit/lsh_r" + std::to_string(rounds) + suffix);
      if (points == data.points.end()) continue;
      if (const auto exponent = detail::fitted_exponent(points->second, 4096)) {
        out << "| LSH R = " << rounds << ", automatic buckets: fitted complexity, n = 4096 ... " << max_n << " | "
            << detail::exponent_text(*exponent) << " | exponent <= 1.20 | " << (exponent->value <= 1.2 ? "yes" : "NO")
            << " |\n";
      }
    }
    for (const bool factorized : {true, false}) {
      const auto points =
          data.points.find(std::string("lsh_hash/") + (factorized ? "automatic" : "unfactorized") + suffix);
      if (points == data.points.end()) continue;
      if (const auto exponent = detail::fitted_exponent(points->second, 4096)) {
        out << "| hashing alone, " << (factorized ? "automatic (factorized)" : "plain count")
            << " buckets: fitted complexity | " << detail::exponent_text(*exponent) << " | (measured, "
            << (factorized ? "~n^1.5 / c^0.5" : "~n^2 / c") << " expected) | - |\n";
      }
    }
  });
}

}  // namespace attnkit::bench
