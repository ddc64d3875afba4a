// Extra memory of one attnkit call (PERF.md): peak resident set of this process while one
// call runs, minus its resident set just before the call, when Q, K, V and O are allocated and
// touched. Reads VmHWM / VmRSS from /proc/self/status (Linux).
//
//   attnkit_memory_probe [--n=32768] [--heads=8] [--dim=64] [--pattern=full] [--append]
//                        [--out=memory.md]
// --pattern: full, causal, linformer_kp256 (one shared E and F of 256 x n, created before the
// baseline is read: they are the model's weights, not the call's memory), lsh_r8 (Reformer
// LSH with 8 rounds, chunk 64, automatic buckets; q serves as k), rpe_m64 (FFT-RPE, PRF
// with 64 features, an unclipped shared bias table, the FFT path), or a sparse pattern
// of bench_patterns.hpp; --append adds the line to --out instead of replacing it (one process
// per pattern: the peak is per process).

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "bench_patterns.hpp"

namespace {

/// A "Vm...:   1234 kB" line of /proc/self/status, in bytes.
double status_bytes(std::string_view key) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(key.size() + 1)) * 1024.0;
  }
  return -1;
}

std::string flag(int argc, char** argv, std::string_view name, std::string fallback) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == name) return "1";
    if (arg.rfind(std::string(name) + "=", 0) == 0) return std::string(arg.substr(name.size() + 1));
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const long n = std::stol(flag(argc, argv, "--n", "32768"));
  const long heads = std::stol(flag(argc, argv, "--heads", "8"));
  const long dim = std::stol(flag(argc, argv, "--dim", "64"));
  const std::string pattern = flag(argc, argv, "--pattern", "full");
  const bool append = flag(argc, argv, "--append", "") == "1";
  const std::string out_path = flag(argc, argv, "--out", "");

  const std::size_t elements = static_cast<std::size_t>(heads * n * dim);
  std::vector<float> q(elements, 0.5f), k(elements, 0.25f), v(elements, 1.0f), o(elements, 0.0f);
  const auto view = [&](std::vector<float>& x) { return attnkit::bhld(x.data(), 1, heads, n, dim); };
  const auto run = [&](const auto& p) { attnkit::attention(p, view(q), view(k), view(v), view(o)); };
  std::optional<attnkit::Linformer> linformer;
  if (pattern == "linformer_kp256") linformer = attnkit::Linformer::gaussian(256, n, 1, 2020);
  std::optional<attnkit::KernelizedRpe> rpe;  // its bias table is the model's, like Linformer's E and F
  if (pattern == "rpe_m64") {
    rpe = attnkit::KernelizedRpe{.features = 64,
                                 .bias = attnkit::RpeBias(n - 1, std::vector<float>(2 * n - 1, 0.0f)),
                                 .algorithm = attnkit::RpeAlgorithm::kFft};
  }
  const double before = status_bytes("VmRSS:");
  if (linformer) {
    run(*linformer);
  } else if (rpe) {
    run(*rpe);
  } else if (pattern == "lsh_r8") {
    attnkit::attention(attnkit::Lsh{.rounds = 8}, view(q), view(q), view(v), view(o));
  } else if (pattern == "full" || pattern == "causal") {
    run(attnkit::Full{.causal = pattern == "causal"});
  } else {
    attnkit::bench::with_sparse_pattern(pattern, n, run);
  }
  const double peak = status_bytes("VmHWM:");
  const double mib = 1024.0 * 1024.0;

  std::ostringstream report;
  report << "- " << pattern << ", B=1, H=" << heads << ", n=" << n << ", D=" << dim
         << ", fp32: Q+K+V+O = " << 4.0 * elements * sizeof(float) / mib << " MiB; peak RSS during the call "
         << peak / mib << " MiB; RSS before the call " << before / mib << " MiB; extra memory of the call "
         << (peak - before) / mib << " MiB (limit 64 MiB)\n";
  std::fputs(report.str().c_str(), stdout);
  if (!out_path.empty()) std::ofstream(out_path, append ? std::ios::app : std::ios::trunc) << report.str();
  return peak >= 0 && before >= 0 ? 0 : 1;
}
