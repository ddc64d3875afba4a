#pragma once
// The report's all-kinds section: every registered kind (pattern/kinds.hpp) side by side, each
// with its fitted exponent and its crossover n against full attention in the same run.

#include <algorithm>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attnkit/pattern/kinds.hpp"
#include "report.hpp"

namespace attnkit::bench {

/// One configuration in the all-kinds table: its family kind (the names --attnkit_kinds
/// takes), its label, and the registered kind it runs (pattern/kinds.hpp; a Schedule runs
/// several, a Union none of its own).
struct ComparedKind {
  std::string_view family, label, registered;
};
inline constexpr ComparedKind kComparedKinds[] = {
    {"full", "full", "Full"},
    {"causal", "causal", "Full"},
    {"window_r256", "window r = 256", "SlidingWindow"},
    {"dilated_r256_d4", "dilated r = 256, d = 4", "Dilated"},
    {"longformer_r256_global1", "Longformer r = 256, 1 global", "Global"},
    {"block64_band5_global1", "block-sparse b = 64", "BlockSparse"},
    {"bigbird_b64_r3", "BigBird b = 64, r = 3", "BigBird"},
    {"lsh_r2", "LSH R = 2", "Lsh"},
    {"linformer_kp256", "Linformer kp = 256", "Linformer"},
    {"rpe_fft_m32", "FFT-RPE m = 32", "KernelizedRpe"},
    {"masformer_f1of4_b512", "MASFormer 1 of 4 layers full, b = 512 (per layer)", ""}};

/// Whether every registered kind has a configuration in kComparedKinds.
constexpr bool every_kind_compared() {
  for (std::string_view kind : Kinds::names) {
    bool found = false;
    for (const ComparedKind& compared : kComparedKinds) found = found || compared.registered == kind;
    if (!found) return false;
  }
  return true;
}
static_assert(every_kind_compared(), "a registered kind (pattern/kinds.hpp) has no configuration in kComparedKinds");

/// (family kind, label) of the kinds compared, one configuration each: the names
/// --attnkit_kinds takes; plot_kinds.py reads the same list from the JSON's context
/// (kinds_context()).
inline const std::vector<std::pair<std::string, std::string>>& compared_kinds() {
  static const std::vector<std::pair<std::string, std::string>> kinds = [] {
    std::vector<std::pair<std::string, std::string>> all;
    for (const ComparedKind& compared : kComparedKinds) all.emplace_back(compared.family, compared.label);
    return all;
  }();
  return kinds;
}

/// The kinds as "kind=label;kind=label;...", for Google Benchmark's JSON context.
inline std::string kinds_context() {
  std::string result;
  for (const auto& [kind, label] : compared_kinds()) result += (result.empty() ? "" : ";") + kind + "=" + label;
  return result;
}

/// The benchmark filter that runs only the listed kinds' families on `threads` threads:
/// `list` is "all" or comma-separated names of compared_kinds(); an unknown or empty name
/// throws std::invalid_argument naming it and the valid ones.
inline std::string kinds_filter(const std::string& list, int threads) {
  std::string alternatives;
  const auto add = [&](const std::string& kind) { alternatives += (alternatives.empty() ? "" : "|") + kind; };
  if (list == "all") {
    for (const auto& kind : compared_kinds()) add(kind.first);
  } else {
    for (std::size_t begin = 0; begin <= list.size();) {
      const std::size_t end = std::min(list.find(',', begin), list.size());
      const std::string name = list.substr(begin, end - begin);
      const bool known = std::any_of(compared_kinds().begin(), compared_kinds().end(),
                                     [&](const auto& kind) { return kind.first == name; });
      if (!known) {
        std::string valid;
        for (const auto& kind : compared_kinds()) valid += " " + kind.first;
        throw std::invalid_argument("--attnkit_kinds: \"" + name + "\" is not a kind; the kinds are \"all\" or" +
                                    valid);
      }
      add(name);
      begin = end + 1;
    }
  }
  return "^attnkit/(" + alternatives + ")/D:64/threads:" + std::to_string(threads) + "/";
}

/// First n of a kind's fitted exponent: 4096 (smaller sizes are dominated by fixed costs and
/// by bands that cover most of the sequence), or a quarter of its largest n when that is
/// smaller (short runs, --attnkit_max_n); plot_kinds.py fits the same range.
inline index_t kinds_fit_from(const std::vector<Point>& points) { return std::min<index_t>(4096, points.back().n / 4); }

/// Table: per kind the n range, the fitted exponent (kinds_fit_from; marked when fitted over
/// fewer than 4 sizes), the time and GFLOP/s at
/// the largest n full attention ran (16384 in the bench preset), and the crossover: the
/// smallest n (of those both families ran) from which every larger one is faster than full
/// attention at the same n, medians of this run. `whole_suite`: the report holds the kinds'
/// paired sections (not so for --attnkit_kinds runs and bench-quick), which the text cites.
inline void write_kinds_section(std::ostream& out, const ReportData& data, int threads, bool whole_suite) {
  using detail::fixed;
  const std::string suffix = "/D:64/threads:" + std::to_string(threads);
  const auto full = data.points.find("attnkit/full" + suffix);
  const index_t probe_n = full != data.points.end() && !full->second.empty() ? full->second.back().n : 16384;
  out << "\n## Every kind side by side: H = 8, D = Dv = 64, " << threads << " threads\n\n"
      << "Medians of whole calls (the families above). Crossover: the smallest n from which the kind is faster than "
         "full attention at every larger n both ran (full runs to "
      << probe_n << "), from the families' medians, measured minutes apart: an overview, not a paired ratio"
      << (whole_suite ? " (the kinds' sections above give their speedups over full attention paired)" : "") << ".\n\n"
      << "| kind | n | fitted exponent | n = " << probe_n << ": ms | n = " << probe_n
      << ": GFLOP/s | crossover against full |\n|---|---|---|---|---|---|\n";
  for (const auto& [kind, label] : compared_kinds()) {
    const auto points = data.points.find("attnkit/" + kind + suffix);
    if (points == data.points.end() || points->second.empty()) continue;
    const std::vector<Point>& p = points->second;
    const index_t fit_from = kinds_fit_from(p);
    const auto exponent = detail::fitted_exponent(p, fit_from);
    const Point* at_probe = detail::find_point(data.points, "attnkit/" + kind + suffix, probe_n);
    std::optional<index_t> crossover;
    bool compared = false;
    if (full != data.points.end() && kind != "full") {
      for (auto q = p.rbegin(); q != p.rend(); ++q) {
        const Point* reference = detail::find_point(data.points, "attnkit/full" + suffix, q->n);
        if (reference == nullptr) continue;
        compared = true;
        if (q->seconds >= reference->seconds) break;
        crossover = q->n;
      }
    }
    out << "| " << label << " | " << p.front().n << " ... " << p.back().n << " | "
        << (exponent ? detail::exponent_text(*exponent) + ", n >= " + std::to_string(fit_from) : "-") << " | "
        << (at_probe ? fixed(at_probe->seconds * 1e3, 1) : "-") << " | "
        << (at_probe ? fixed(at_probe->gflops(), 1) : "-") << " | "
        << (kind == "full" ? "-"
            : crossover    ? std::to_string(*crossover)
            : compared     ? "none"
                           : "-")
        << " |\n";
  }
}

}  // namespace attnkit::bench
