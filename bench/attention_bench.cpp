// attnkit benchmarks: roofs, baselines and kernels in one run, plus a markdown report.
//
//   attnkit_bench [--attnkit_report=report.md] [--attnkit_memory=memory.md]
//                 [--attnkit_kinds=all|KIND,KIND,...] [--attnkit_list_kinds]
//                 [--attnkit_min_n=N] [--attnkit_max_n=N] [google benchmark flags...]
//
// Without --attnkit_kinds: the whole suite (every family below, the issues' targets). With it:
// only those kinds' families (2 threads, D = 64; names from --attnkit_list_kinds) and the
// all-kinds table. --attnkit_min_n / --attnkit_max_n clip every family's n range; the table
// is printed at the end of any run.
//
// Method (PERF.md): Release, -march=native, UseRealTime (OpenMP), median of repetitions,
// FLOP counted from attended pairs (PatternCost), efficiency against the FMA peak this binary
// measures before the benchmarks start.

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "attnkit/attnkit.hpp"
#include "attnkit/eigen.hpp"
#include "bench_patterns.hpp"
#include "bench_support.hpp"
#include "cache_prefill_bench.hpp"
#include "decode_bench.hpp"
#include "dense_paired_bench.hpp"
#include "half_precision_bench.hpp"
#if ATTNKIT_BENCH_DISPATCH
#include "dispatch_bench.hpp"
#endif
#include "kernelized_rpe_bench.hpp"
#include "kinds_report.hpp"
#include "linformer_bench.hpp"
#include "lsh_bench.hpp"
#include "machine_roofs.hpp"
#include "micro_kernels_bench.hpp"
#include "naive_attention.hpp"
#include "report.hpp"
#include "schedule_bench.hpp"
#include "score_modifiers_bench.hpp"
#include "sparse_bench.hpp"

namespace {

using attnkit::index_t;
using attnkit::bench::BenchmarkInfo;
using attnkit::bench::finish;
using attnkit::bench::Inputs;
using attnkit::bench::kHeads;
using attnkit::bench::register_at;
using attnkit::bench::register_family;
using attnkit::bench::sizes;
using attnkit::bench::time_pattern;

/// Times planning alone (what attnkit::attention computes per call before the kernel runs).
template <class Pattern>
void time_planning(benchmark::State& state, const Pattern& pattern) {
  const index_t n = state.range(0);
  const attnkit::AttentionShape shape{1, kHeads, kHeads, n, n, 64, 64};
  for (auto _ : state) {
    auto plan = pattern.plan(shape, attnkit::TileShape{});
    benchmark::DoNotOptimize(plan);
  }
  finish(state, n, 0, 1);
}

/// A sparse pattern of bench_patterns.hpp: attention at n = 1024 ... max_n, and planning
/// alone at n = 16384.
void register_sparse(attnkit::bench::Registry& registry, const std::string& kind, int threads, index_t max_n) {
  register_family(registry, kind, 64, threads, 1024, max_n, [=](benchmark::State& state) {
    attnkit::bench::with_sparse_pattern(kind, state.range(0),
                                        [&](const auto& pattern) { time_pattern(state, pattern, 64, threads); });
  });
  const std::string name = "planning/" + kind + "/D:64/threads:1";
  auto* family = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    attnkit::bench::with_sparse_pattern(kind, state.range(0),
                                        [&](const auto& pattern) { time_planning(state, pattern); });
  });
  family->Arg(16384)->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(3)->ReportAggregatesOnly();
  registry.add(name, BenchmarkInfo{"planning", kind, 64, 1});
}

void register_attnkit(attnkit::bench::Registry& registry, bool causal, index_t dim, int threads, index_t max_n) {
  register_family(registry, causal ? "causal" : "full", dim, threads, 256, max_n,
                  [=](benchmark::State& state) { time_pattern(state, attnkit::Full{.causal = causal}, dim, threads); });
}

void register_naive(attnkit::bench::Registry& registry, bool causal, index_t dim, int threads, index_t max_n) {
  const std::string name = std::string("naive_eigen/") + (causal ? "causal" : "full") + "/D:" + std::to_string(dim) +
                           "/threads:" + std::to_string(threads);
  auto* family = register_at(name, sizes(256, std::min<index_t>(max_n, 4096)), [=](benchmark::State& state) {
    const index_t n = state.range(0);
    Inputs in(n, dim);
    attnkit::RowMatrix<float> scores(n, n);
    Eigen::setNbThreads(threads);
    for (auto _ : state) {
      attnkit::bench::naive_eigen_attention(in.q.data(), in.k.data(), in.v.data(), in.out.data(), kHeads, n, dim,
                                            causal, scores);
      benchmark::DoNotOptimize(in.out.data());
    }
    // Work credited as for attnkit: the attended pairs, not the dense product actually done.
    const attnkit::AttentionShape shape{1, kHeads, kHeads, n, n, dim, dim};
    finish(state, n, attnkit::Full{.causal = causal}.cost(shape).flops, threads);
  });
  if (family != nullptr)
    family->UseRealTime()
        ->Unit(benchmark::kMillisecond)
        ->Complexity(benchmark::oAuto)
        ->Repetitions(3)
        ->ReportAggregatesOnly();
  registry.add(name, BenchmarkInfo{"naive_eigen", causal ? "causal" : "full", dim, threads});
}

void register_reference(attnkit::bench::Registry& registry, index_t dim, index_t max_n) {
  const std::string name = "reference/full/D:" + std::to_string(dim) + "/threads:1";
  auto* family = register_at(name, sizes(256, std::min<index_t>(max_n, 1024)), [=](benchmark::State& state) {
    const index_t n = state.range(0);
    Inputs in(n, dim);
    const auto view = [&](auto& buffer) { return attnkit::bhld(buffer.data(), 1, kHeads, n, dim); };
    for (auto _ : state) {
      attnkit::reference::attention(attnkit::Full{}, view(in.q), view(in.k), view(in.v), view(in.out));
      benchmark::DoNotOptimize(in.out.data());
    }
    const attnkit::AttentionShape shape{1, kHeads, kHeads, n, n, dim, dim};
    finish(state, n, attnkit::Full{}.cost(shape).flops, 1);
  });
  if (family != nullptr)
    family->UseRealTime()->Unit(benchmark::kMillisecond)->Complexity(benchmark::oAuto)->Repetitions(1);
  registry.add(name, BenchmarkInfo{"reference", "full", dim, 1});
}

/// Eigen's product Q K^T of the attention's shape (n = 4096): the GEMM roof of PERF.md.
void register_gemm_roof(attnkit::bench::Registry& registry, index_t dim, int threads) {
  const std::string name = "roof/eigen_qkt/D:" + std::to_string(dim) + "/threads:" + std::to_string(threads);
  auto* family = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& state) {
    const index_t n = state.range(0);
    const attnkit::RowMatrix<float> q = attnkit::RowMatrix<float>::Random(n, dim);
    const attnkit::RowMatrix<float> k = attnkit::RowMatrix<float>::Random(n, dim);
    attnkit::RowMatrix<float> s(n, n);
    Eigen::setNbThreads(threads);
    for (auto _ : state) {
      s.noalias() = q * k.transpose();
      benchmark::DoNotOptimize(s.data());
    }
    finish(state, n, 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(dim), threads);
  });
  family->Arg(4096)->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(3)->ReportAggregatesOnly();
  registry.add(name, BenchmarkInfo{"roof", "eigen_qkt", dim, threads});
}

std::string flag_value(int argc, char** argv, std::string_view flag, std::string fallback) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg.substr(0, flag.size()) == flag && arg.size() > flag.size() && arg[flag.size()] == '=') {
      return std::string(arg.substr(flag.size() + 1));
    }
  }
  return fallback;
}

bool has_flag(int argc, char** argv, std::string_view flag) {
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == flag) return true;
  return false;
}

/// The value of --<flag>=N as a positive n, or std::invalid_argument naming flag and value.
index_t size_flag(int argc, char** argv, std::string_view flag, index_t fallback) {
  const std::string text = flag_value(argc, argv, flag, "");
  if (text.empty()) return fallback;
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < 1) {
    throw std::invalid_argument(std::string(flag) + "=" + text + ": must be a positive integer");
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) try {
  if (has_flag(argc, argv, "--attnkit_list_kinds")) {
    for (const auto& [kind, label] : attnkit::bench::compared_kinds())
      std::printf("%-26s %s\n", kind.c_str(), label.c_str());
    return 0;
  }
  // The command line as given, for the report's header (before benchmark::Initialize consumes flags).
  std::string command = "attnkit_bench";
  for (int a = 1; a < argc; ++a) command += std::string(" ") + argv[a];
  const std::string report_path = flag_value(argc, argv, "--attnkit_report", "");
  const std::string memory_path = flag_value(argc, argv, "--attnkit_memory", "");
  const std::string kinds = flag_value(argc, argv, "--attnkit_kinds", "");
  auto& range = attnkit::bench::g_size_range;
  range.min_n = size_flag(argc, argv, "--attnkit_min_n", range.min_n);
  range.max_n = size_flag(argc, argv, "--attnkit_max_n", range.max_n);
  if (range.min_n > range.max_n) {
    throw std::invalid_argument("--attnkit_min_n=" + std::to_string(range.min_n) +
                                " exceeds --attnkit_max_n=" + std::to_string(range.max_n));
  }
  benchmark::Initialize(&argc, argv);
  const int all_threads = omp_get_max_threads();
  const std::string filter = kinds.empty() ? "" : attnkit::bench::kinds_filter(kinds, all_threads);
  if (!filter.empty() && !benchmark::GetBenchmarkFilter().empty()) {
    throw std::invalid_argument("--attnkit_kinds=" + kinds +
                                " and --benchmark_filter=" + benchmark::GetBenchmarkFilter() + ": give one of them");
  }

  attnkit::bench::g_roofs.load_average_at_start = attnkit::bench::detail::load_average();
  attnkit::bench::g_roofs.fma_peak_gflops[1] = attnkit::bench::measure_fma_peak_gflops(1);
  attnkit::bench::g_roofs.fma_peak_gflops[all_threads] = attnkit::bench::measure_fma_peak_gflops(all_threads);
  std::printf("FMA peak: %.1f GFLOP/s (1 thread), %.1f GFLOP/s (%d threads), %s\n",
              attnkit::bench::g_roofs.fma_peak_gflops[1], attnkit::bench::g_roofs.fma_peak_gflops[all_threads],
              all_threads, attnkit::simd::arch_name());

  // Every family's own largest n (the n range flags clip them further): quadratic work stops
  // at 16384 (8192 on one thread and at D = 128), the sub-quadratic kinds run to 65536.
  const index_t dense_max_n = std::min<index_t>(range.max_n, 16384);
  const index_t sparse_max_n = std::min<index_t>(range.max_n, 65536);
  const index_t small_max_n = std::min<index_t>(range.max_n, 8192);

  // Full attention's targets, paired: against the FMA probe for D = 32 ... 128,
  // and its speedups over one thread, over causal and over naive Eigen.
  attnkit::bench::Registry registry;
  register_gemm_roof(registry, 64, all_threads);
  attnkit::bench::register_micro_kernels(registry);
  attnkit::bench::register_peak_paired(registry, all_threads);
  attnkit::bench::register_dense_ratios(registry, all_threads);
  registry.add_target_rows([=](std::ostream& out, const attnkit::bench::ReportData& data) {
    attnkit::bench::write_dense_paired_targets(out, data, all_threads);
  });
  registry.add_section([=](std::ostream& out, const attnkit::bench::ReportData& data) {
    attnkit::bench::write_peak_section(out, data, all_threads);
  });
#if ATTNKIT_BENCH_DISPATCH
  // Runtime dispatch: attnkit::dispatch's targets against this build, paired.
  attnkit::bench::register_dispatch_paired(registry, all_threads);
  registry.add_target_rows([=](std::ostream& out, const attnkit::bench::ReportData& data) {
    attnkit::bench::write_dispatch_targets(out, data, all_threads);
  });
  registry.add_section([=](std::ostream& out, const attnkit::bench::ReportData& data) {
    attnkit::bench::write_dispatch_section(out, data, all_threads);
  });
#endif
  // Half precision: every kind on bfloat16 and float16 against float, paired, and
  // the bf16 dot-product roof beside the FMA roof.
  attnkit::bench::g_bf16_roof = attnkit::bench::measure_bf16_roof(all_threads);
  attnkit::bench::register_half_paired(registry, all_threads, dense_max_n);
  registry.add_target_rows([=](std::ostream& out, const attnkit::bench::ReportData& data) {
    attnkit::bench::write_half_targets(out, data, all_threads);
  });
  registry.add_section([=](std::ostream& out, const attnkit::bench::ReportData& data) {
    attnkit::bench::write_half_section(out, data, all_threads);
  });
  // Score modifiers: soft-capping and ALiBi against the plain call, paired.
  attnkit::bench::register_modifiers_paired(registry, all_threads);
  registry.add_target_rows([=](std::ostream& out, const attnkit::bench::ReportData& data) {
    attnkit::bench::write_modifier_targets(out, data, all_threads);
  });
  registry.add_section([=](std::ostream& out, const attnkit::bench::ReportData& data) {
    attnkit::bench::write_modifier_section(out, data, all_threads);
  });
  // Decode over KV caches: every cache type and layout against the read probe,
  // paired; 8-bit blocks against float16; a causal window against the full cache.
  attnkit::bench::register_decode_paired(registry, all_threads);
  registry.add_target_rows([=](std::ostream& out, const attnkit::bench::ReportData& data) {
    attnkit::bench::write_decode_targets(out, data, all_threads);
  });
  registry.add_section([=](std::ostream& out, const attnkit::bench::ReportData& data) {
    attnkit::bench::write_decode_section(out, data, all_threads);
  });
  // Prefill over a paged cache against the tensor call on the same keys, and a mixed batch
  // (a prompt chunk beside one-row decodes) against the two calls it replaces, paired.
  attnkit::bench::register_cache_prefill_paired(registry, all_threads);
  attnkit::bench::register_mixed_batch_paired(registry, all_threads);
  registry.add_target_rows([=](std::ostream& out, const attnkit::bench::ReportData& data) {
    attnkit::bench::write_cache_prefill_targets(out, data, all_threads);
  });
  for (const bool causal : {false, true}) {
    register_attnkit(registry, causal, 64, all_threads, dense_max_n);
    register_attnkit(registry, causal, 64, 1, small_max_n);
  }
  for (const bool causal : {false, true}) register_attnkit(registry, causal, 128, all_threads, small_max_n);
  // Sparse patterns, n = 1024 ... 65536; their GFLOP/s per attended pair against
  // full attention's, paired at n = 16384.
  attnkit::bench::register_sparse_paired(registry, all_threads);
  for (const std::string& kind : attnkit::bench::sparse_pattern_names()) {
    register_sparse(registry, kind, all_threads, sparse_max_n);
  }
  // Linformer, n = 1024 ... 65536, with its paired speedup over full attention.
  attnkit::bench::register_linformer_benchmarks(registry, all_threads, sparse_max_n);
  // Reformer LSH, n = 1024 ... 65536, with its paired speedup over full attention.
  attnkit::bench::register_lsh_benchmarks(registry, all_threads, sparse_max_n);
  attnkit::bench::register_rpe_benchmarks(registry, all_threads, sparse_max_n);
  // The MASFormer schedule, per layer, n = 1024 ... 16384 (it holds a full layer).
  attnkit::bench::register_schedule_benchmarks(registry, all_threads, dense_max_n);
  // The naive baselines to n = 4096 (D = 128: 2048), GFLOP/s of their own (the speedup over
  // them is paired/dense_ratios').
  for (const index_t dim : {index_t{64}, index_t{128}})
    for (const bool causal : {false, true})
      register_naive(registry, causal, dim, all_threads, dim == 64 ? dense_max_n : 2048);
  register_reference(registry, 64, dense_max_n);
  registry.add_section(
      [=](std::ostream& out, const attnkit::bench::ReportData& data) {
        attnkit::bench::write_kinds_section(out, data, all_threads, /*whole_suite=*/filter.empty());
      },
      attnkit::bench::SectionScope::kAnyRun);

  benchmark::AddCustomContext("attnkit_kinds", attnkit::bench::kinds_context());
  attnkit::bench::CollectingReporter reporter;
  // An explicit spec replaces --benchmark_filter: pass the flag's own value when no kinds
  // were named.
  benchmark::RunSpecifiedBenchmarks(&reporter, filter.empty() ? benchmark::GetBenchmarkFilter() : filter);
  benchmark::Shutdown();

  // The all-kinds table on the console too: what a run of --attnkit_kinds is for.
  const auto points = attnkit::bench::detail::points_by_family(reporter.runs());
  std::ostringstream table;
  attnkit::bench::write_kinds_section(table, {reporter.runs(), points, attnkit::bench::g_roofs}, all_threads,
                                      /*whole_suite=*/filter.empty());
  std::printf("%s", table.str().c_str());
  if (!report_path.empty()) {
    attnkit::bench::write_report(report_path, registry, reporter.runs(), attnkit::bench::g_roofs, memory_path,
                                 /*whole_suite=*/filter.empty(), command);
    std::printf("report written to %s\n", report_path.c_str());
  }
  return 0;
} catch (const std::invalid_argument& error) {
  std::fprintf(stderr, "attnkit_bench: %s\n", error.what());
  return 2;
}
