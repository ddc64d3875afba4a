#pragma once
// Score modifiers (SPEC.md section 14), paired: soft-capping, ALiBi and both against the same
// call without them, the four calls alternating in one process.
//   paired/modifiers/<kind>/D:<d>/threads:<t>  n = 4096, B = 1, H = 8; kind full, causal or
//       window256 (SlidingWindow::symmetric(256)); counters softcap_over_plain,
//       alibi_over_plain, both_over_plain: per round, the plain call's time over the modified
//       call's (its speed as a fraction of the plain call's), median with _min and _max.
// Soft-capping at 30 (Gemma 2's attention cap is 50), ALiBi's standard slopes for 8 heads.

#include <benchmark/benchmark.h>

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "bench_support.hpp"
#include "dense_paired_bench.hpp"
#include "report.hpp"

namespace attnkit::bench {

/// The target: a modified call at >= 95% of the plain call's speed (full and window kinds).
inline constexpr double kModifierTarget = 0.95;
inline constexpr index_t kModifierPairedN = 4096;
inline constexpr int kModifierRounds = 9;

namespace detail {

inline std::string modifier_family(const std::string& kind, index_t dim, int threads) {
  return "paired/modifiers/" + kind + "/D:" + std::to_string(dim) + "/threads:" + std::to_string(threads);
}

/// Calls f(pattern) with the kind `name`.
template <class F>
void with_modifier_kind(const std::string& name, F&& f) {
  if (name == "full") return f(Full{});
  if (name == "causal") return f(Full{.causal = true});
  f(SlidingWindow::symmetric(256));
}

/// The options of the four calls: plain, softcap, ALiBi, both.
inline std::vector<Options> modifier_options(int threads) {
  Options plain{.threads = threads};
  Options softcap = plain, alibi = plain, both = plain;
  softcap.softcap = both.softcap = 30;
  alibi.alibi_slopes = both.alibi_slopes = alibi_slopes(kHeads);
  return {plain, softcap, alibi, both};
}

inline const std::vector<std::string>& modifier_tags() {
  static const std::vector<std::string> tags{"softcap_over_plain", "alibi_over_plain", "both_over_plain"};
  return tags;
}

}  // namespace detail

/// f(team, kind, dim) for every family: full, causal and window256 at D = 64 and 128, on 1 and
/// `threads` threads.
template <class F>
void for_each_modifier_family(int threads, F&& f) {
  for (const int team : detail::peak_teams(threads))
    for (const char* kind : {"full", "causal", "window256"})
      for (const index_t dim : {index_t{64}, index_t{128}}) f(team, std::string(kind), dim);
}

inline void register_modifiers_paired(Registry& registry, int threads) {
  for_each_modifier_family(threads, [&](int team, const std::string& kind, index_t dim) {
    const std::string name = detail::modifier_family(kind, dim, team);
    auto* family = register_at(name, sizes(kModifierPairedN, kModifierPairedN), [=](benchmark::State& state) {
      const index_t n = state.range(0);
      Inputs in(n, dim);
      const std::vector<Options> options = detail::modifier_options(team);
      detail::with_modifier_kind(kind, [&](const auto& pattern) {
        const auto seconds = [&](std::size_t which) { return call_seconds(pattern, in, n, dim, options[which]); };
        for (std::size_t which = 0; which < options.size(); ++which) seconds(which);  // warm
        std::vector<double> plain_times;
        std::vector<std::vector<double>> ratios(3);
        for (auto _ : state) {
          for (int round = 0; round < kModifierRounds; ++round) {
            // The plain call first in even rounds and last in odd ones: a drift favours no side.
            std::vector<double> t(options.size());
            for (std::size_t k = 0; k < options.size(); ++k) {
              const std::size_t which = round % 2 == 0 ? k : options.size() - 1 - k;
              t[which] = seconds(which);
            }
            plain_times.push_back(t[0]);
            for (std::size_t m = 0; m < 3; ++m) ratios[m].push_back(t[0] / t[m + 1]);
          }
          state.SetIterationTime(median(plain_times));
        }
        for (std::size_t m = 0; m < 3; ++m) set_ratio_counters(state, detail::modifier_tags()[m], ratios[m]);
        state.counters["rounds"] = kModifierRounds;
      });
    });
    if (family == nullptr) return;
    family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
    registry.add(name, BenchmarkInfo{"paired", "modifiers/" + kind, dim, team});
  });
}

namespace detail {
inline std::string modifier_ratio_cell(const ReportData& data, const std::string& name, const std::string& tag) {
  const auto value = find_counter(data.runs, name, kModifierPairedN, tag);
  if (!value) return "not measured";
  return ratio_text(*value, *find_counter(data.runs, name, kModifierPairedN, tag + "_min"),
                    *find_counter(data.runs, name, kModifierPairedN, tag + "_max"), 100, 1, "%");
}
}  // namespace detail

/// The target rows: softcap and ALiBi over the plain call, every family.
inline void write_modifier_targets(std::ostream& out, const ReportData& data, int threads) {
  for_each_modifier_family(threads, [&](int team, const std::string& kind, index_t dim) {
    const std::string name = detail::modifier_family(kind, dim, team);
    for (const std::string& tag : {std::string("softcap_over_plain"), std::string("alibi_over_plain")}) {
      const auto value = detail::find_counter(data.runs, name, kModifierPairedN, tag);
      out << "| " << kind << ", n = " << kModifierPairedN << ", D = " << dim << ", " << team
          << (team == 1 ? " thread" : " threads") << ": " << tag.substr(0, tag.find('_'))
          << " over the plain call, paired | " << detail::modifier_ratio_cell(data, name, tag)
          << " | >= " << detail::fixed(100 * kModifierTarget, 0) << "% | "
          << (value ? (*value >= kModifierTarget ? "yes" : "NO") : "-") << " |\n";
    }
  });
}

/// Report section: every family's three ratios.
inline void write_modifier_section(std::ostream& out, const ReportData& data, int threads) {
  out << "## Score modifiers\n\n"
      << "Soft-capping (cap 30), ALiBi (standard slopes) and both against the same call without them, the four "
         "calls alternating (bench/score_modifiers_bench.hpp), n = "
      << kModifierPairedN << ", H = " << kHeads
      << ". Each cell: the modified call's speed as a fraction of the plain call's, median of the rounds "
         "[min, max].\n\n"
      << "| kind | D | threads | softcap | ALiBi | both |\n|---|---|---|---|---|---|\n";
  for_each_modifier_family(threads, [&](int team, const std::string& kind, index_t dim) {
    const std::string name = detail::modifier_family(kind, dim, team);
    out << "| " << kind << " | " << dim << " | " << team;
    for (const std::string& tag : detail::modifier_tags()) out << " | " << detail::modifier_ratio_cell(data, name, tag);
    out << " |\n";
  });
  out << "\n";
}

}  // namespace attnkit::bench
