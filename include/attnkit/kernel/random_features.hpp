#pragma once
// Random feature maps of kernelized attention (SPEC.md section 9; Choromanski et al., arXiv
// 2009.14794, for PRF, TRF and ORF; Luo et al., arXiv 2106.12566, for the normalised NPRF):
// the random matrices and the stabilised features of a block of rows.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <Eigen/Core>
#include <Eigen/QR>

#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/rng.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/kernel/sequential_gemm.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/convert.hpp"
#include "attnkit/simd/feature_rows.hpp"

namespace attnkit {

/// phi of SPEC.md section 9 (m random vectors w_r; x' the scaled input below):
///   kPositive (PRF):            m^{-1/2} exp(W x' - |x'|^2 / 2), m features;
///   kTrigonometric (TRF):       m^{-1/2} exp(|x'|^2 / 2) [cos(W x'); sin(W x')], 2m features;
///   kNormalizedPositive (NPRF): PRF of x / max(|x|, 1e-12) / sqrt(temperature), m features:
///                               softmax of q^.k^ / temperature between unit vectors, whose
///                               features stay bounded whatever the input norms.
enum class FeatureMap { kPositive, kTrigonometric, kNormalizedPositive };

inline bool is_known(FeatureMap map) {
  return map == FeatureMap::kPositive || map == FeatureMap::kTrigonometric || map == FeatureMap::kNormalizedPositive;
}

/// Features per input row: m, or 2m for TRF.
inline index_t feature_count(FeatureMap map, index_t random_vectors) {
  return map == FeatureMap::kTrigonometric ? 2 * random_vectors : random_vectors;
}

namespace kernel {

/// The m x D matrix W (row-major, double) of head `head`, from the counter-based generator
/// keyed by (seed, layer, head, entry): i.i.d. N(0, 1) entries, or with `orthogonal` (ORF)
/// ceil(m / D) stacked blocks, each the Q of a QR of a Gaussian D x D block with the signs of
/// R's diagonal moved into Q (so Q is Haar-distributed), its rows rescaled by the norms of
/// independent Gaussian D-vectors (chi-distributed, as the rows of a Gaussian W are); the
/// last block keeps its first m mod D rows. HouseholderQr is the decomposition of the blocks
/// (Eigen's); being a template parameter, it is instantiated only where features are drawn:
/// as an inline function this was instantiated in every translation unit including attnkit,
/// 4-5 s of each one's compile time with GCC 12.
template <class HouseholderQr = Eigen::HouseholderQR<Eigen::MatrixXd>>
std::vector<double> random_feature_matrix(index_t m, index_t dim, bool orthogonal, std::uint64_t seed,
                                          std::uint64_t layer, index_t head) {
  const auto h = static_cast<std::uint64_t>(head);
  std::vector<double> w(static_cast<std::size_t>(m * dim));
  const auto gaussian = [&](index_t entry) {
    return normal_from_counter(seed, layer, h, static_cast<std::uint64_t>(entry));
  };
  if (!orthogonal) {
    for (index_t e = 0; e < m * dim; ++e) w[static_cast<std::size_t>(e)] = gaussian(e);
    return w;
  }
  constexpr index_t kNormStream = index_t(1) << 40;  // entries of the norm vectors
  for (index_t block = 0; block * dim < m; ++block) {
    Eigen::MatrixXd g(dim, dim);
    for (index_t r = 0; r < dim; ++r)
      for (index_t d = 0; d < dim; ++d) g(r, d) = gaussian(block * dim * dim + r * dim + d);
    const HouseholderQr qr(g);
    Eigen::MatrixXd q = qr.householderQ();
    const Eigen::MatrixXd& r_factor = qr.matrixQR();
    for (index_t c = 0; c < dim; ++c) {
      if (r_factor(c, c) < 0) q.col(c) = -q.col(c);
    }
    for (index_t r = 0; r < dim && block * dim + r < m; ++r) {
      double norm = 0;
      for (index_t d = 0; d < dim; ++d) {
        const double z = gaussian(kNormStream + (block * dim + r) * dim + d);
        norm += z * z;
      }
      norm = std::sqrt(norm);
      // Rows of the orthogonal block: the columns of Q (orthonormal), scaled to chi norms.
      for (index_t d = 0; d < dim; ++d) w[static_cast<std::size_t>((block * dim + r) * dim + d)] = norm * q(d, r);
    }
  }
  return w;
}

/// How rows become features: the input scale (sigma for PRF and TRF, whose inputs are
/// pre-scaled by sqrt(|sigma|), keys also by sign(sigma); 1 / sqrt(temperature) on unit rows
/// for NPRF) and the map.
struct FeatureMapSpec {
  FeatureMap map = FeatureMap::kPositive;
  double scale = 1.0;        // sigma of the logits (PRF, TRF)
  double temperature = 1.0;  // NPRF
};

/// The stabilised features of one (batch, query head) in blocks of features, for kernel and
/// reference alike (the reference recomputes the same closed forms in double):
///   x' = rho_i x_i, rho_i = sqrt(|sigma|) (keys: times sign(sigma)), or for NPRF
///        1 / (max(|x_i|, 1e-12) sqrt(temperature));
///   P[i][u] = w_{u mod m} . x_i (u < m: cos, u >= m: sin for TRF);
///   query features: PRF/NPRF exp(rho_i P - max_u rho_i P), TRF cos/sin(rho_i P);
///   key features:   PRF/NPRF exp(rho_j P - |x'_j|^2 / 2 - M), M the largest such exponent
///                   of the head; TRF exp(|x'_j|^2 / 2 - M) cos/sin(rho_j P), M = max_j |x'_j|^2 / 2.
/// These differ from SPEC.md's phi by a factor per query row and one per head, which cancel
/// in numerator / denominator, and no exponent exceeds 0, so nothing overflows.
template <class T>
class FeatureBlocks {
 public:
  static constexpr double kNormFloor = 1e-12;

  /// w: m x D (double, random_feature_matrix).
  FeatureBlocks(const std::vector<double>& w, index_t m, index_t dim, const FeatureMapSpec& spec)
      : spec_(spec),
        m_(m),
        dim_(dim),
        features_(feature_count(spec.map, m)),
        transposed_(static_cast<std::size_t>(dim * features_)) {
    for (index_t u = 0; u < features_; ++u)
      for (index_t d = 0; d < dim; ++d)
        transposed_[static_cast<std::size_t>(d * features_ + u)] =
            static_cast<T>(w[static_cast<std::size_t>((u % m) * dim + d)]);
  }

  index_t features() const { return features_; }
  bool trigonometric() const { return spec_.map == FeatureMap::kTrigonometric; }
  bool exponential() const { return !trigonometric(); }

  /// rho_i and |x'_i|^2 / 2 of rows x[i * stride], i < rows (arrays of rows rounded up to
  /// kWidth<T>; the padding set to 0). Rows of x here and below hold T or a half type (widened
  /// exactly).
  template <class S>
  void row_scales(const S* x, index_t stride, index_t rows, bool keys, T* rho, T* half_square) const {
    constexpr index_t kW = static_cast<index_t>(simd::kWidth<T>);
    const double sign = keys && spec_.scale < 0 ? -1.0 : 1.0;
    const double root = std::sqrt(std::abs(spec_.scale));
    for (index_t i = 0; i < rows; ++i) {
      double square = 0;
      for (index_t d = 0; d < dim_; ++d)
        square += static_cast<double>(widen(x[i * stride + d])) * static_cast<double>(widen(x[i * stride + d]));
      double r = sign * root;
      if (spec_.map == FeatureMap::kNormalizedPositive) {
        r = 1.0 / (std::max(std::sqrt(square), kNormFloor) * std::sqrt(spec_.temperature));
      }
      rho[i] = static_cast<T>(r);
      half_square[i] = static_cast<T>(0.5 * r * r * square);
    }
    const index_t padded = (rows + kW - 1) / kW * kW;
    std::fill(rho + rows, rho + padded, T(0));
    std::fill(half_square + rows, half_square + padded, T(0));
  }

  /// projections[u * ld + i] = P[i][u0 + u] for i < rows, u < count (column-major). Half rows
  /// are widened kWidenedRows at a time into per-thread scratch.
  template <class S>
  void project(const S* x, index_t stride, index_t rows, index_t u0, index_t count, T* projections, index_t ld) const {
    for (index_t u = 0; u < count; ++u) std::fill(projections + u * ld, projections + u * ld + rows, T(0));
    if constexpr (std::is_same_v<S, T>) {
      gemm_accumulate<T, true>(rows, count, dim_, x, stride, transposed_.data() + u0, features_, projections, ld);
    } else {
      constexpr index_t kWidenedRows = 256;
      T* widened = attnkit::detail::thread_scratch<struct WidenedFeatureRowsTag, T>(kWidenedRows * dim_);
      for (index_t i0 = 0; i0 < rows; i0 += kWidenedRows) {
        const index_t block = std::min(kWidenedRows, rows - i0);
        for (index_t i = 0; i < block; ++i) simd::widen_row(x + (i0 + i) * stride, dim_, widened + i * dim_);
        gemm_accumulate<T, true>(block, count, dim_, widened, dim_, transposed_.data() + u0, features_,
                                 projections + i0, ld);
      }
    }
  }

  /// Query side: the row's largest exponent max_u rho_i P[i][u] (the per-row stabiliser of
  /// PRF/NPRF; 0 for TRF) for rows x[i * stride], i < rows. scratch: rows * features().
  template <class S>
  void query_shifts(const S* x, index_t stride, index_t rows, const T* rho, T* shift, T* scratch) const {
    if (trigonometric()) {
      std::fill(shift, shift + rows, T(0));
      return;
    }
    project(x, stride, rows, 0, features_, scratch, rows);
    for (index_t i = 0; i < rows; ++i) {
      T best = -std::numeric_limits<T>::infinity();
      for (index_t u = 0; u < features_; ++u) best = std::max(best, rho[i] * scratch[u * rows + i]);
      shift[i] = best;
    }
  }

  /// Key side: the largest exponent over rows x[i * stride], i < rows (PRF/NPRF:
  /// rho P - |x'|^2 / 2, TRF: |x'|^2 / 2); the head's M is the max over all its rows.
  template <class S>
  T key_max(const S* x, index_t stride, index_t rows, const T* rho, const T* half_square, T* scratch) const {
    T best = -std::numeric_limits<T>::infinity();
    if (trigonometric()) {
      for (index_t i = 0; i < rows; ++i) best = std::max(best, half_square[i]);
      return best;
    }
    project(x, stride, rows, 0, features_, scratch, rows);
    for (index_t u = 0; u < features_; ++u)
      best = std::max(best, simd::max_of_scaled_rows(scratch + u * rows, rho, half_square, rows));
    return best;
  }

  /// Features u0 .. u0 + count of rows x[i * stride], i < rows, into out[u * ld + i]
  /// (ld >= rows rounded up to kWidth<T>). shift: per-row query shifts (query side) or
  /// half_square + M (key side, exponential maps); amplitude for TRF keys exp(|x'|^2/2 - M)
  /// (1 for TRF queries).
  template <class S>
  void features(const S* x, index_t stride, index_t rows, index_t u0, index_t count, const T* rho,
                const T* shift_or_amplitude, T* out, index_t ld) const {
    project(x, stride, rows, u0, count, out, ld);
    for (index_t u = 0; u < count; ++u) {
      T* column = out + u * ld;
      if (exponential()) {
        simd::exp_of_scaled_rows(column, rho, shift_or_amplitude, rows);
      } else {
        simd::trig_of_scaled_rows(column, rho, shift_or_amplitude, rows, u0 + u >= m_);
      }
    }
  }

 private:
  FeatureMapSpec spec_;
  index_t m_, dim_, features_;
  std::vector<T> transposed_;  // [D x features] row-major: column u is w_{u mod m}
};

}  // namespace kernel
}  // namespace attnkit
