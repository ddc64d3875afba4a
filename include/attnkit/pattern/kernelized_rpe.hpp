#pragma once
// attnkit::KernelizedRpe: kernelized attention with a relative-position bias, by FFT (SPEC.md
// section 9; Luo et al., "Stable, Fast and Accurate: Kernelized Attention with Relative
// Positional Encoding", arXiv 2106.12566).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/QR>

#include "attnkit/core/call.hpp"
#include "attnkit/core/cost.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/rpe_bias.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/kernel/fftw_engine.hpp"
#include "attnkit/kernel/kernelized_rpe_plan.hpp"
#include "attnkit/kernel/random_features.hpp"
#include "attnkit/kernel/toeplitz_fft.hpp"

namespace attnkit {

/// How KernelizedRpe evaluates its sums: kAuto picks by cost() and by the FFT's accuracy
/// limit (below), kFft and kDirect force one.
enum class RpeAlgorithm { kAuto, kFft, kDirect };

/// o_i = sum_j c_{j-i} phi(q_i).phi(k_j) v_j / sum_j c_{j-i} phi(q_i).phi(k_j) with
/// c_t = exp(b_t - max b): an unbiased random-feature estimate of softmax attention with the
/// relative-position bias b (SPEC.md section 9), exp(sigma q.k + b_{j-i}), in O(n log n).
///   features: m random vectors per head (TRF has 2m features); map and orthogonal (ORF
///   blocks, for any map) choose phi; temperature applies to NPRF, whose logits are
///   q^.k^ / temperature between the unit rows q^ = q / |q|, k^ = k / |k| (Options::scale
///   does not apply to it; for PRF and TRF it is sigma, default 1/sqrt(D)).
///   seed, layer: the counter-based generator of the random matrices (feature_matrix);
///   identical for any thread count or batch composition.
///   bias: RpeBias (per head or shared, clipped beyond max_distance; default none).
///   causal: keys after the query's position get c = 0 (the lower-triangular Toeplitz).
///   algorithm: kAuto, kFft (O(n log n): Toeplitz products by circulant FFT) or kDirect
///   (the O(Lq Lk (m + Dv)) sums).
///   fft: the FFT path's engine (RpeFft: kLanes, the default; kEigen; kFftw where the build
///   has ATTNKIT_FFTW). The engines compute the same products to rounding; kAuto's rate
///   model is calibrated for kLanes.
/// The FFT's error in each Toeplitz product is relative to the largest entries of the
/// column, so rows whose sums are much smaller than the largest row's lose digits (a steep
/// one-sided decay, a peak some rows cannot reach, the first rows of a causal call):
/// fft_direct_rows gives the model, by which kAuto sums a causal call's first rows directly
/// and sends a non-causal call beyond kFftAccuracyBudget to the direct path. Numerator and denominator mix
/// every K and V row (the FFT mixes all positions), so NaN or Inf in any row, even a causally
/// excluded one, reaches every output. No log-sum-exp exists: a call with lse throws.
/// Usage: attnkit::KernelizedRpe rpe{.features = 32, .bias = attnkit::RpeBias(n - 1, table)};
///        attnkit::attention(rpe, q, k, v, out);
struct KernelizedRpe {
  /// The largest predicted relative FFT error kAuto accepts (SPEC.md's rtol of 1e-4, with
  /// room for the factor the estimate leaves out).
  static constexpr double kFftAccuracyBudget = 2e-5;
  /// kAuto's throughput model: FFT-path FLOP (fft_flops) run at this fraction of the direct
  /// path's rate (direct_flops). Measured by the benchmarks attnkit/rpe_fft_m32 and
  /// attnkit/rpe_direct_m32 (bench preset, one run) on a 2-core AMD EPYC with AVX-512
  /// (H = 8, D = Dv = 64): 73 / 90, 80 / 104 and 72 / 110 GFLOP/s at n = 1024, 2048, 4096
  /// (27.9 / 18.8, 55.1 / 63.7 and 133 / 238 ms), so the paths cross between n = 1024 and
  /// 2048, where the model puts them (docs/notes/fft-rpe.md).
  static constexpr double kFftRelativeRate = 0.75;

  index_t features = 64;
  FeatureMap map = FeatureMap::kPositive;
  bool orthogonal = false;
  double temperature = 1.0;
  std::uint64_t seed = 0;
  std::uint64_t layer = 0;
  RpeBias bias = {};
  bool causal = false;
  RpeAlgorithm algorithm = RpeAlgorithm::kAuto;
  RpeFft fft = RpeFft::kLanes;

  /// W of query head `head` for head dimension dim: features x dim, row-major (double).
  /// (A template of the orthogonal blocks' QR, kernel::random_feature_matrix's, so that the
  /// QR is compiled only where W is drawn, not in every file including attnkit.)
  template <class HouseholderQr = Eigen::HouseholderQR<Eigen::MatrixXd>>
  std::vector<double> feature_matrix(index_t head, index_t dim) const {
    check_parameters();
    if (dim < 1) detail::reject("dim", dim, "must be >= 1");
    return kernel::random_feature_matrix<HouseholderQr>(features, dim, orthogonal, seed, layer, head);
  }

  /// Throws attnkit::invalid_argument unless the pattern can run on `shape`.
  void validate(const AttentionShape& shape) const {
    check_parameters();
    if (!bias.empty() && bias.heads() != 1 && bias.heads() != shape.q_heads) {
      detail::reject("KernelizedRpe.bias tables", bias.heads(),
                     "must be 1 (shared) or q.sizes[heads] = " + std::to_string(shape.q_heads) + " (one per head)");
    }
  }

  /// Whether a call of `shape` in a type of this epsilon takes the FFT path: kFft and kDirect
  /// force it; kAuto takes it when it meets the accuracy budget and costs less.
  bool uses_fft(const AttentionShape& shape, double epsilon = std::numeric_limits<float>::epsilon()) const {
    return choose_path(shape, epsilon).fft;
  }

  /// The FFT path's accuracy model: row i's numerator and denominator scale with its reach
  /// mass M_i (RpeBias::reach_mass), the FFT's error with the largest row's, so its relative
  /// error is about eps log2(L) max M / M_i. Rows above kFftAccuracyBudget (or with nothing
  /// to attend, which the FFT would fill with rounding noise instead of 0) are summed
  /// directly when they form a prefix reaching few keys, as causal rows do (the first rows
  /// of a causal call have few terms against the last rows' n); returns how many, or nullopt
  /// when a non-causal call has such rows (the FFT cannot meet the budget there).
  std::optional<index_t> fft_direct_rows(const AttentionShape& shape, double epsilon) const {
    validate(shape);
    const double length = static_cast<double>(kernel::circulant_length(shape.q_len, shape.kv_len));
    index_t rows = 0;
    for (index_t h = 0; h < (bias.heads() > 1 ? shape.q_heads : 1); ++h) {
      const std::vector<double> mass = bias.reach_mass(h, shape.q_len, shape.kv_len, causal);
      const double largest = mass.empty() ? 0.0 : *std::max_element(mass.begin(), mass.end());
      for (index_t i = shape.q_len; i-- > rows;) {
        const double m = mass[static_cast<std::size_t>(i)];
        if (m > 0 && epsilon * std::log2(length) * largest / m <= kFftAccuracyBudget) continue;
        if (!causal) return std::nullopt;
        rows = i + 1;
        break;
      }
    }
    return rows;
  }

  template <class T, class... Elements>
  kernel::KernelizedRpePlan<T> plan(const AttentionCall<T, Elements...>& call, const TileShape& /*tiles*/) const {
    validate(call.shape);
    if (call.lse != nullptr) {
      detail::reject("lse", "given",
                     "KernelizedRpe computes no log-sum-exp (its weights are not a softmax); call without lse");
    }
    const kernel::FeatureMapSpec spec{map, static_cast<double>(call.scale), temperature};
    std::vector<kernel::FeatureBlocks<T>> heads;
    heads.reserve(static_cast<std::size_t>(call.shape.q_heads));
    for (index_t h = 0; h < call.shape.q_heads; ++h) {
      heads.emplace_back(feature_matrix(h, call.shape.head_dim), features, call.shape.head_dim, spec);
    }
    const Path path = choose_path(call.shape, std::numeric_limits<T>::epsilon());
    return kernel::KernelizedRpePlan<T>(std::move(heads), bias, causal, path.fft, path.direct_rows, fft);
  }

  /// Pairs: every (query, key) pair the bias reaches (Lq Lk, or the causal count); FLOP: the
  /// chosen path's, all in extra_flops (no softmax): features 2 (Lq + Lk) D m' plus, for the
  /// FFT, m' (Dv + 1) complex transforms of 5 L log2 L (a forward and an inverse per pair of
  /// real columns) and their 6 L spectrum products per pair; for the direct path
  /// 2 Lq Lk (m' + Dv + 1) (scores, the bias product, the denominator and values).
  PatternCost cost(const AttentionShape& shape) const {
    validate(shape);
    const double q = static_cast<double>(shape.q_len), k = static_cast<double>(shape.kv_len);
    const double shift = k - q;
    // Causal pairs: key j <= i + (Lk - Lq), summed over i.
    double pairs = q * k;
    if (causal) {
      pairs = 0;
      for (index_t i = 0; i < shape.q_len; ++i) pairs += std::clamp(static_cast<double>(i) + shift + 1, 0.0, k);
    }
    PatternCost cost;
    const double heads = static_cast<double>(shape.batch) * static_cast<double>(shape.q_heads);
    cost.attended_pairs = pairs * heads;
    cost.density = q * k > 0 ? pairs / (q * k) : 0.0;
    const Path path = choose_path(shape, std::numeric_limits<float>::epsilon());
    cost.flops = (path.fft ? fft_flops(shape) + prefix_flops(shape, path.direct_rows) : direct_flops(shape)) * heads;
    cost.extra_flops = cost.flops;
    return cost;
  }

  /// FLOP per (batch, head) of each path (cost()'s terms).
  double feature_flops(const AttentionShape& shape) const {
    const double m = static_cast<double>(feature_count(map, features));
    return 2.0 * static_cast<double>(shape.q_len + shape.kv_len) * static_cast<double>(shape.head_dim) * m;
  }
  double fft_flops(const AttentionShape& shape) const {
    const double m = static_cast<double>(feature_count(map, features));
    const double length = static_cast<double>(kernel::circulant_length(shape.q_len, shape.kv_len));
    const double columns = m * static_cast<double>(shape.value_dim + 1);
    return feature_flops(shape) + transform_flops(shape) + columns / 2 * 6 * length;
  }
  /// The transforms alone: m' (Dv + 1) complex FFTs of length L at 5 L log2 L.
  double transform_flops(const AttentionShape& shape) const {
    const double m = static_cast<double>(feature_count(map, features));
    const double length = static_cast<double>(kernel::circulant_length(shape.q_len, shape.kv_len));
    return m * static_cast<double>(shape.value_dim + 1) * 5 * length * std::log2(length);
  }
  /// The direct sums of the FFT path's first `rows` rows (causal: about rows^2 / 2 pairs).
  double prefix_flops(const AttentionShape& shape, index_t rows) const {
    const double m = static_cast<double>(feature_count(map, features));
    const double r = static_cast<double>(rows);
    const double pairs =
        causal ? r * (r + 1) / 2 + r * std::max<double>(0, static_cast<double>(shape.kv_len - shape.q_len))
               : r * static_cast<double>(shape.kv_len);
    return 2.0 * pairs * (m + static_cast<double>(shape.value_dim) + 1);
  }
  double direct_flops(const AttentionShape& shape) const {
    const double m = static_cast<double>(feature_count(map, features));
    return feature_flops(shape) + 2.0 * static_cast<double>(shape.q_len) * static_cast<double>(shape.kv_len) *
                                      (m + static_cast<double>(shape.value_dim) + 1);
  }

 private:
  /// The path of a call and, on the FFT path, the rows summed directly (fft_direct_rows; a
  /// forced FFT on a non-causal call beyond the budget runs the FFT on every row).
  struct Path {
    bool fft = false;
    index_t direct_rows = 0;
  };
  Path choose_path(const AttentionShape& shape, double epsilon) const {
    validate(shape);
    if (algorithm == RpeAlgorithm::kDirect) return Path{};
    // kAuto sums directly where no circulant fits; kFft reports it (kernel::circulant_length).
    if (algorithm == RpeAlgorithm::kAuto && !kernel::fits_circulant(shape.q_len, shape.kv_len)) return Path{};
    const std::optional<index_t> direct_rows = fft_direct_rows(shape, epsilon);
    if (algorithm == RpeAlgorithm::kFft) return Path{true, direct_rows.value_or(0)};
    if (shape.q_len == 0 || shape.kv_len == 0 || !direct_rows) return Path{};
    const bool cheaper =
        (fft_flops(shape) + prefix_flops(shape, *direct_rows)) / kFftRelativeRate < direct_flops(shape);
    return Path{cheaper, cheaper ? *direct_rows : 0};
  }

  void check_parameters() const {
    if (features < 1) detail::reject("KernelizedRpe.features", features, "must be >= 1 (m random features)");
    if (!is_known(map))
      detail::reject("KernelizedRpe.map", static_cast<int>(map), "is not a FeatureMap (PRF, TRF or NPRF)");
    if (!(temperature > 0) || !std::isfinite(temperature)) {
      detail::reject("KernelizedRpe.temperature", temperature, "must be finite and > 0");
    }
    if (algorithm != RpeAlgorithm::kAuto && algorithm != RpeAlgorithm::kFft && algorithm != RpeAlgorithm::kDirect) {
      detail::reject("KernelizedRpe.algorithm", static_cast<int>(algorithm),
                     "is not an RpeAlgorithm (auto, fft or direct)");
    }
    if (fft != RpeFft::kLanes && fft != RpeFft::kEigen && fft != RpeFft::kFftw) {
      detail::reject("KernelizedRpe.fft", static_cast<int>(fft), "is not an RpeFft (lanes, eigen or fftw)");
    }
    if (fft == RpeFft::kFftw && !kernel::kHaveFftw) {
      detail::reject(
          "KernelizedRpe.fft", "kFftw",
          "needs a build with FFTW (CMake option ATTNKIT_FFTW=ON, or define ATTNKIT_WITH_FFTW and link fftw3f/fftw3)");
    }
  }
};

}  // namespace attnkit
