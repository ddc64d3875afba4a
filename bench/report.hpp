#pragma once
// Collects benchmark runs and writes the markdown report of the bench preset.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "bench_patterns.hpp"

#ifndef ATTNKIT_BENCH_FLAGS
#define ATTNKIT_BENCH_FLAGS "unknown"
#endif

namespace attnkit::bench {

/// What a benchmark family measures: implementation, pattern kind, head dim, threads.
struct BenchmarkInfo {
  std::string implementation;  // attnkit, naive_eigen, reference, roof
  std::string kind;            // full, causal, eigen_qkt
  index_t dim = 0;
  int threads = 1;
};

/// What this run measured of the machine before the benchmarks: the FMA roofs (threads ->
/// GFLOP/s) and the load average (/proc/loadavg's 1, 5 and 15 minute figures).
struct Roofs {
  std::map<int, double> fma_peak_gflops;
  std::string load_average_at_start;
};

struct Point;

/// What a report section reads: every run, the median points by family, the roofs.
struct ReportData {
  const std::vector<benchmark::BenchmarkReporter::Run>& runs;
  const std::map<std::string, std::vector<Point>>& points;
  const Roofs& roofs;
};
/// A kind's own section of the report (e.g. linformer_bench.hpp), written after the targets.
using ReportSection = std::function<void(std::ostream&, const ReportData&)>;

/// Which runs a report section needs: the whole suite (a kind's section reads its paired and
/// phase benchmarks), or any run (the all-kinds table, written for --attnkit_kinds too).
enum class SectionScope { kWholeSuite, kAnyRun };

/// Families in registration order, by name, and the kinds' own report sections.
class Registry {
 public:
  void add(const std::string& name, const BenchmarkInfo& info) {
    order_.push_back(name);
    info_[name] = info;
  }
  void add_section(ReportSection section, SectionScope scope = SectionScope::kWholeSuite) {
    sections_.emplace_back(std::move(section), scope);
  }
  /// Rows of the whole suite's targets table (| target | measured | required | met |).
  void add_target_rows(ReportSection rows) { target_rows_.push_back(std::move(rows)); }
  const std::vector<std::string>& names() const { return order_; }
  const BenchmarkInfo& info(const std::string& name) const { return info_.at(name); }
  const std::vector<std::pair<ReportSection, SectionScope>>& sections() const { return sections_; }
  const std::vector<ReportSection>& target_rows() const { return target_rows_; }

 private:
  std::vector<std::string> order_;
  std::map<std::string, BenchmarkInfo> info_;
  std::vector<std::pair<ReportSection, SectionScope>> sections_;
  std::vector<ReportSection> target_rows_;
};

/// Console output as usual, plus a copy of every run for the report.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  CollectingReporter() : ConsoleReporter(OO_None) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    runs_.insert(runs_.end(), runs.begin(), runs.end());
    ConsoleReporter::ReportRuns(runs);
  }
  const std::vector<Run>& runs() const { return runs_; }

 private:
  std::vector<Run> runs_;
};

/// One size of one family: median real time per call (or the single repetition's time).
struct Point {
  index_t n = 0;
  double seconds = 0;
  double flops = 0;
  double gflops() const { return flops / seconds * 1e-9; }
};

namespace detail {

inline std::map<std::string, std::vector<Point>> points_by_family(
    const std::vector<benchmark::BenchmarkReporter::Run>& runs) {
  std::map<std::string, std::vector<Point>> result;
  for (const auto& run : runs) {
    if (run.error_occurred || run.report_big_o || run.report_rms) continue;
    const bool median =
        run.run_type == benchmark::BenchmarkReporter::Run::RT_Aggregate && run.aggregate_name == "median";
    const bool single = run.run_type == benchmark::BenchmarkReporter::Run::RT_Iteration && run.repetitions <= 1;
    // Paired benchmarks carry ratios, not FLOP: sections read them through find_counter.
    if ((!median && !single) || !run.counters.count("flop")) continue;
    Point point;
    point.n = std::stoll(run.run_name.args);
    point.seconds = run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
    point.flops = run.counters.at("flop").value;
    result[run.run_name.function_name].push_back(point);
  }
  return result;
}

/// A fitted complexity exponent and the number of sizes it was fitted over.
struct Exponent {
  double value;
  int sizes;
};

/// Least-squares slope of log(time) against log(n) over the points with n >= first_n (smaller
/// sizes are dominated by fixed costs): the fitted complexity exponent.
inline std::optional<Exponent> fitted_exponent(const std::vector<Point>& points, index_t first_n) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int count = 0;
  for (const Point& p : points) {
    if (p.n < first_n) continue;
    const double x = std::log(static_cast<double>(p.n)), y = std::log(p.seconds);
    sx += x, sy += y, sxx += x * x, sxy += x * y, ++count;
  }
  if (count < 2) return std::nullopt;
  return Exponent{(count * sxy - sx * sy) / (count * sxx - sx * sx), count};
}

/// Sizes below which a fitted exponent is marked as weak (two or three points fit almost
/// any slope the noise gives them).
inline constexpr int kTrustedFitSizes = 4;

/// Smallest n of a family's complexity fit: 1024, and 4096 for the sparse patterns, whose
/// bands (up to 2049 tokens for the radius-256 dilation-4 window) cover most of a shorter
/// sequence, so their attended pairs only become linear in n from there.
inline index_t fit_from(const BenchmarkInfo& info) {
  const bool dense = info.kind == "full" || info.kind == "causal" || info.implementation != "attnkit";
  return dense ? 1024 : 4096;
}

inline const Point* find_point(const std::map<std::string, std::vector<Point>>& points, const std::string& family,
                               index_t n) {
  const auto it = points.find(family);
  if (it == points.end()) return nullptr;
  for (const Point& p : it->second)
    if (p.n == n) return &p;
  return nullptr;
}

inline std::string family_name(const std::string& implementation, const std::string& kind, index_t dim, int threads) {
  return implementation + "/" + kind + "/D:" + std::to_string(dim) + "/threads:" + std::to_string(threads);
}

inline std::string fixed(double value, int digits) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(digits);
  out << value;
  return out.str();
}

/// "O(n^1.02)", or "O(n^1.02) (3 sizes only)" when fitted over fewer than kTrustedFitSizes.
inline std::string exponent_text(const Exponent& exponent) {
  return "O(n^" + fixed(exponent.value, 2) + ")" +
         (exponent.sizes < kTrustedFitSizes ? " (" + std::to_string(exponent.sizes) + " sizes only)" : "");
}

/// Counter `name` of family `function` at n (its median aggregate, or its single run).
inline std::optional<double> find_counter(const std::vector<benchmark::BenchmarkReporter::Run>& runs,
                                          const std::string& function, index_t n, const std::string& name) {
  for (const auto& run : runs) {
    const bool median_or_single = run.run_type == benchmark::BenchmarkReporter::Run::RT_Iteration
                                      ? run.repetitions <= 1
                                      : run.aggregate_name == "median";
    if (run.run_name.function_name == function && run.run_name.args == std::to_string(n) && median_or_single &&
        run.counters.count(name)) {
      return run.counters.at(name).value;
    }
  }
  return std::nullopt;
}

/// "12.3x [11.0, 14.1] of 5": a paired benchmark's median speedup for `tag` at n, its range
/// and the number of pairs, or "-".
inline std::string paired_speedup(const std::vector<benchmark::BenchmarkReporter::Run>& runs,
                                  const std::string& function, index_t n, const std::string& tag) {
  const auto speedup = find_counter(runs, function, n, tag + "_speedup");
  if (!speedup) return "-";
  return fixed(*speedup, 1) + "x [" + fixed(*find_counter(runs, function, n, tag + "_speedup_min"), 1) + ", " +
         fixed(*find_counter(runs, function, n, tag + "_speedup_max"), 1) + "] of " +
         fixed(*find_counter(runs, function, n, "pairs"), 0);
}

/// The CPU as lscpu names it: "model name", vendor, family, model and stepping of
/// /proc/cpuinfo's first processor, the logical CPUs and cpu0's data and unified caches as
/// /sys/devices/system/cpu/cpu0/cache reports them (sysconf's figures can be the host's in a
/// VM).
inline std::string cpu_description() {
  std::map<std::string, std::string> fields;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line) && !line.empty();) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    fields.emplace(key, colon + 2 <= line.size() ? line.substr(colon + 2) : "");
  }
  const auto field = [&](const std::string& key) { return fields.count(key) ? fields.at(key) : std::string("?"); };
  std::string caches;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    std::string level, type, size;
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size) || type == "Instruction") continue;
    caches += ", L" + level + (type == "Data" ? "d " : " ") + size;
  }
  return field("model name") + " (" + field("vendor_id") + ", family " + field("cpu family") + ", model " +
         field("model") + ", stepping " + field("stepping") + "), " +
         std::to_string(std::thread::hardware_concurrency()) + " logical CPUs" + caches;
}

/// The compiler that built the benchmark, by name and version (clang's version string ends in
/// a space, trimmed).
inline std::string compiler_description() {
#if defined(__clang__)
  std::string name = "clang " __clang_version__;
#elif defined(__GNUC__)
  std::string name = "GCC " __VERSION__;
#else
  std::string name = __VERSION__;
#endif
  while (!name.empty() && name.back() == ' ') name.pop_back();
  return name;
}

/// /proc/loadavg's 1, 5 and 15 minute load averages ("?" where there is none).
inline std::string load_average() {
  std::ifstream file("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(file >> one >> five >> fifteen)) return "?";
  return one + " " + five + " " + fifteen;
}

/// The report's warning when the all-threads FMA probe is below 1.8x the one-thread probe on
/// two or more threads: another process had a core, and every figure of the run is suspect.
inline std::string shared_machine_warning(const Roofs& roofs) {
  if (roofs.fma_peak_gflops.size() < 2) return "";
  const auto& [threads, all] = *roofs.fma_peak_gflops.rbegin();
  const double one = roofs.fma_peak_gflops.begin()->second;
  constexpr double kMinimumScaling = 1.8;
  if (threads < 2 || one <= 0 || all >= kMinimumScaling * one) return "";
  return "\n**Warning: the " + std::to_string(threads) + "-thread FMA probe reached only " + fixed(all / one, 2) +
         "x the 1-thread probe (below " + fixed(kMinimumScaling, 1) +
         "x): someone else was using the machine; this run's figures are suspect.**\n";
}

}  // namespace detail

/// Writes the report: environment, roofs, one table per family that ran (n, time, GFLOP/s,
/// % of the FMA peak measured at the start of the run, fitted exponent), then for the whole
/// suite the issues' target checks and every section, else (a run of some kinds) only the
/// sections of SectionScope::kAnyRun. Ratios between implementations come from the paired
/// benchmarks' sections, never from two families' medians.
inline void write_report(const std::string& path, const Registry& registry,
                         const std::vector<benchmark::BenchmarkReporter::Run>& runs, const Roofs& roofs,
                         const std::string& memory_path, bool whole_suite, const std::string& command) {
  using detail::fixed;
  const auto points = detail::points_by_family(runs);
  std::ofstream out(path);
  const char* bind = std::getenv("OMP_PROC_BIND");
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  out << "# attnkit benchmark report\n\n"
      << "- date: " << date << "\n"
      << "- command: `" << command << "`\n"
      << "- compiler: " << detail::compiler_description() << "\n- flags: `" << ATTNKIT_BENCH_FLAGS << "`\n"
      << "- CPU: " << detail::cpu_description() << "\n"
      << "- load average (1, 5, 15 minutes): " << roofs.load_average_at_start << " at the start, "
      << detail::load_average() << " at the end\n"
      << "- SIMD: " << simd::arch_name() << " (" << simd::kWidth<float> << " floats per vector)\n"
      << "- OMP_PROC_BIND: " << (bind ? bind : "unset") << "\n"
      << "- method: Google Benchmark, real time, median of the repetitions; FLOP = 2 * attended pairs * (D + Dv)"
      << " (exp not counted); B = 1, H = 8, fp32, N(0,1) inputs\n\n";

  out << "## Roofs measured in this run\n\n| roof | threads | GFLOP/s |\n|---|---|---|\n";
  for (const auto& [threads, gflops] : roofs.fma_peak_gflops)
    out << "| FMA peak (independent fma chains) | " << threads << " | " << fixed(gflops, 1) << " |\n";
  out << detail::shared_machine_warning(roofs);
  for (const auto& name : registry.names()) {
    const BenchmarkInfo& info = registry.info(name);
    if (info.implementation != "roof" || !points.count(name)) continue;
    for (const Point& p : points.at(name))
      out << "| Eigen " << info.kind << " n=" << p.n << " D=" << info.dim << " | " << info.threads << " | "
          << fixed(p.gflops(), 1) << " |\n";
  }

  out << "\n## Results\n";
  for (const auto& name : registry.names()) {
    const BenchmarkInfo& info = registry.info(name);
    if (info.implementation == "roof" || info.implementation == "planning" || info.implementation == "paired" ||
        info.implementation == "micro" || !points.count(name)) {
      continue;
    }
    const double peak = roofs.fma_peak_gflops.count(info.threads) ? roofs.fma_peak_gflops.at(info.threads) : 0;
    out << "\n### " << name << "\n\n| n | time (ms) | GFLOP/s | % of the start-of-run FMA peak |\n|---|---|---|---|\n";
    for (const Point& p : points.at(name)) {
      out << "| " << p.n << " | " << fixed(p.seconds * 1e3, 3) << " | " << fixed(p.gflops(), 1) << " | "
          << (peak > 0 ? fixed(100.0 * p.gflops() / peak, 1) : "-") << " |\n";
    }
    const index_t first_n = detail::fit_from(info);
    if (const auto exponent = detail::fitted_exponent(points.at(name), first_n))
      out << "\nfitted complexity (log-log slope of time over n >= " << first_n
          << "): " << detail::exponent_text(*exponent) << "\n";
  }

  const ReportData data{runs, points, roofs};
  if (!whole_suite) {
    for (const auto& [section, scope] : registry.sections())
      if (scope == SectionScope::kAnyRun) section(out, data);
    return;
  }

  // The issues' targets: full attention's from paired benchmarks (dense_paired_bench.hpp),
  // then the sparse patterns' complexity and planning time.
  out << "\n## Targets (fp32, B=1, H=8; full attention at n=4096)\n\n| target | measured | required | met |\n"
         "|---|---|---|---|\n";
  const int all = roofs.fma_peak_gflops.rbegin()->first;
  for (const ReportSection& rows : registry.target_rows()) rows(out, data);

  // Sparse patterns: their complexity and planning time (their GFLOP/s per pair against full
  // attention's is paired: sparse_bench.hpp's section).
  for (const auto& name : registry.names()) {
    const BenchmarkInfo& info = registry.info(name);
    const auto& sparse_kinds = sparse_pattern_names();
    if (info.implementation != "attnkit" || info.threads != all ||
        std::find(sparse_kinds.begin(), sparse_kinds.end(), info.kind) == sparse_kinds.end()) {
      continue;
    }
    if (const auto exponent =
            points.count(name) ? detail::fitted_exponent(points.at(name), detail::fit_from(info)) : std::nullopt) {
      out << "| " << info.kind << ": fitted complexity | " << detail::exponent_text(*exponent)
          << " | O(n): exponent <= 1.15 | " << (exponent->value <= 1.15 ? "yes" : "NO") << " |\n";
    }
    const Point* sparse = detail::find_point(points, name, 16384);
    const Point* planning = detail::find_point(points, detail::family_name("planning", info.kind, 64, 1), 16384);
    if (planning && sparse) {
      out << "| " << info.kind << ", n=16384: planning time / attention time | "
          << fixed(100 * planning->seconds / sparse->seconds, 2) << "% | < 5.00% | "
          << (planning->seconds < 0.05 * sparse->seconds ? "yes" : "NO") << " |\n";
    }
  }

  for (const auto& section : registry.sections()) section.first(out, data);

  if (!memory_path.empty()) {
    std::ifstream memory(memory_path);
    out << "\n## Extra memory of one call\n\n"
        << (memory ? std::string(std::istreambuf_iterator<char>(memory), {}) : "not measured\n");
  }
}

}  // namespace attnkit::bench
