#pragma once
// The report's all-kinds section: every kind of the mission side by side, each with its
// fitted exponent and its crossover n against full attention in the same run.

#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "report.hpp"

namespace attnkit::bench {

/// (family kind, label) of the kinds compared, one configuration each (plot_kinds.py draws
/// the same list).
inline const std::vector<std::pair<std::string, std::string>>& compared_kinds() {
  static const std::vector<std::pair<std::string, std::string>> kinds{
      {"full", "full"},
      {"causal", "causal"},
      {"window_r256", "window r = 256"},
      {"dilated_r256_d4", "dilated r = 256, d = 4"},
      {"longformer_r256_global1", "Longformer r = 256, 1 global"},
      {"block64_band5_global1", "block-sparse b = 64"},
      {"bigbird_b64_r3", "BigBird b = 64, r = 3"},
      {"lsh_r2", "LSH R = 2"},
      {"linformer_kp256", "Linformer kp = 256"},
      {"rpe_fft_m32", "FFT-RPE m = 32"}};
  return kinds;
}

/// Table: per kind the n range, the fitted exponent over n >= 4096, the time and GFLOP/s at
/// n = 16384, and the crossover: the smallest n (of those both families ran) from which every
/// larger one is faster than full attention at the same n, medians of this run.
inline void write_kinds_section(std::ostream& out, const ReportData& data, int threads) {
  using detail::fixed;
  const std::string suffix = "/D:64/threads:" + std::to_string(threads);
  const auto full = data.points.find("attnkit/full" + suffix);
  out << "\n## Every kind side by side: H = 8, D = Dv = 64, " << threads << " threads\n\n"
      << "Medians of whole calls (the families above). Crossover: the smallest n from which the kind is faster than "
         "full attention at every larger n both ran (full runs to 16384). Plots: kinds_time.png and kinds_gflops.png "
         "next to this file (bench/plot_kinds.py; needs python3-matplotlib).\n\n"
      << "| kind | n | fitted exponent, n >= 4096 | n = 16384: ms | n = 16384: GFLOP/s | crossover against full |\n"
         "|---|---|---|---|---|---|\n";
  for (const auto& [kind, label] : compared_kinds()) {
    const auto points = data.points.find("attnkit/" + kind + suffix);
    if (points == data.points.end() || points->second.empty()) continue;
    const std::vector<Point>& p = points->second;
    const auto exponent = detail::fitted_exponent(p, 4096);
    const Point* at16k = detail::find_point(data.points, "attnkit/" + kind + suffix, 16384);
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
        << (exponent ? "O(n^" + fixed(*exponent, 2) + ")" : "-") << " | " << (at16k ? fixed(at16k->seconds * 1e3, 1) : "-")
        << " | " << (at16k ? fixed(at16k->gflops(), 1) : "-") << " | "
        << (kind == "full" ? "-" : crossover ? std::to_string(*crossover) : compared ? "none" : "-") << " |\n";
  }
}

}  // namespace attnkit::bench
