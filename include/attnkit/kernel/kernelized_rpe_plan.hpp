#pragma once
// kernel::KernelizedRpePlan: the executor of attnkit::KernelizedRpe (SPEC.md section 9).

#include <algorithm>
#include <cmath>
#include <concepts>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "attnkit/core/call.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/rpe_bias.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/kernel/eigen_fft_engine.hpp"
#include "attnkit/kernel/fftw_engine.hpp"
#include "attnkit/kernel/random_features.hpp"
#include "attnkit/kernel/sequential_gemm.hpp"
#include "attnkit/kernel/toeplitz_fft.hpp"
#include "attnkit/parallel/team.hpp"
#include "attnkit/simd/batch.hpp"
#include "attnkit/simd/convert.hpp"
#include "attnkit/simd/lane_fft.hpp"

namespace attnkit::kernel {

/// Runs one kernelized-RPE call in one parallel region, per (batch, query head):
///   num_i = sum_j c(j - i - delta) (phi_q_i . phi_k_j) v_j,  den_i = the same with v_j = 1,
///   o_i = num_i / den_i (0 where den_i is exactly 0), c_t = exp(b_t - max b), 0 for t > 0
/// when causal, with the stabilised features of FeatureBlocks. Phases (barriers between):
///   1. stabilisers: each query row's largest exponent, each head's largest key exponent
///      (row blocks of kStabiliserRows), and (FFT) the circulant spectrum of every bias table;
///   2. FFT: items (batch, head, column group): a value group is 2 W value columns and runs
///      every feature u through one ToeplitzBatch (W = kWidth<T>), accumulating
///      phi_q[i][u] y_u[i] into out; the denominator group runs 2 W features per batch.
///      Features come in blocks of kFeatureBlock by GEMM + vectorised exp, recomputed per
///      item (they cost 4 n D m flops against the transforms' m (Dv + 1) 5 L log2 L).
///      Direct: per head, phi_k by feature blocks, then query blocks of kDirectRows rows:
///      S = phi_q phi_k^T by GEMM in key blocks, times c, summed into den and (GEMM) num;
///   3. out_i /= den_i.
/// Each output element is accumulated by one thread in a fixed order: results do not depend
/// on the thread count. Extra memory (FFT, T = float, n = 65536, m = 64, Dv = 64, 2 threads):
/// per thread an [L x 2 W] batch (16 MiB, L = 2^17) and two feature blocks (2 x 2 MiB); the
/// spectra, P x L complex values (1 MiB per table); a query stabiliser and a denominator per
/// (batch, head, row).
template <class T>
class KernelizedRpePlan {
 public:
  /// Features per GEMM block: 8, or fewer when a batch holds fewer columns (SSE2 double: 4),
  /// so a denominator batch is whole blocks and every item computes the same blocks.
  static constexpr index_t kFeatureBlock = std::min<index_t>(8, ToeplitzBatch<T>::kColumns);
  static constexpr index_t kStabiliserRows = 1024;
  static constexpr index_t kDirectRows = 64;
  static constexpr index_t kDirectKeys = 256;

  /// use_fft: the FFT path, with rows [0, direct_rows) summed directly (causal rows whose few
  /// terms the FFT's column-relative error would swamp; KernelizedRpe::fft_direct_rows);
  /// otherwise the direct path for every row.
  /// fft: the engine of the FFT path's Toeplitz products (kFftw only where kHaveFftw).
  KernelizedRpePlan(std::vector<FeatureBlocks<T>> heads, RpeBias bias, bool causal, bool use_fft, index_t direct_rows,
                    RpeFft fft = RpeFft::kLanes)
      : heads_(std::move(heads)),
        bias_(std::move(bias)),
        causal_(causal),
        use_fft_(use_fft),
        direct_rows_(direct_rows),
        fft_(fft) {
    for (index_t table = 0; table < std::max<index_t>(bias_.heads(), 1); ++table)
      bias_max_.push_back(bias_.max_value(table));
  }

  bool uses_fft() const { return use_fft_; }

  /// Half q, k, v widen as features are computed and values read; a half out is accumulated
  /// in float numerators (B Hq Lq Dv elements of T, the FFT passes fold every feature into
  /// them) and narrowed as they are divided.
  template <class Call>
  requires std::same_as<typename Call::value_type, T> &&
      std::same_as<typename Call::input_type, typename Call::key_value_type>
  void execute(const Call& call) const {
    using Output = typename Call::output_type;
    const AttentionShape& s = call.shape;
    if (s.batch == 0 || s.q_heads == 0 || s.q_len == 0) return;
    if (s.kv_len == 0) {  // no keys: every denominator is 0
      parallel::parallel_region(call.threads, [&](parallel::Team& team) {
        team.for_each_static(s.batch * s.q_heads * s.q_len, [&](index_t row) {
          Output* o = call.out.row(row / (s.q_heads * s.q_len), row / s.q_len % s.q_heads, row % s.q_len);
          std::fill(o, o + s.value_dim, store_as<Output>(T(0)));
        });
      });
      return;
    }
    if constexpr (std::is_same_v<Output, T>) {
      run(call, call.out);
    } else {
      T* numerators =
          attnkit::detail::thread_scratch<struct RpeNumeratorsTag, T>(s.batch * s.q_heads * s.q_len * s.value_dim);
      const AttentionCall<T, typename Call::input_type, T> staged{
          s,
          call.q,
          call.k,
          call.v,
          bhld(numerators, s.batch, s.q_heads, s.q_len, s.value_dim),
          call.lse,
          call.scale,
          call.threads,
          call.key_lengths};
      run(staged, call.out);
    }
  }

 private:
  static constexpr index_t kW = static_cast<index_t>(simd::kWidth<T>);

  /// The phases on `call` (whose out holds T), then o = num / den into `result` (call.out, or
  /// the half out the numerators narrow into).
  template <class Call, class Output>
  void run(const Call& call, const TensorView<Output>& result) const {
    const AttentionShape& s = call.shape;
    Workspace work(*this, s);
    parallel::parallel_region(call.threads, [&](parallel::Team& team) {
      stabilise(call, work, team);
      if (use_fft_) run_fft(call, work, team);
      if (work.direct_rows > 0) run_direct(call, work, team);
      team.for_each_static(s.batch * s.q_heads, [&](index_t bh) { divide(call, work, bh, result); });
    });
  }

  /// Shared state of one call.
  struct Workspace {
    Workspace(const KernelizedRpePlan& plan, const AttentionShape& s)
        : direct_rows(plan.use_fft_ ? std::min(plan.direct_rows_, s.q_len) : s.q_len),
          direct_keys(plan.causal_ ? std::clamp<index_t>(direct_rows + s.kv_len - s.q_len, 0, s.kv_len) : s.kv_len),
          key_ld(attnkit::detail::round_up(direct_keys, kW)),
          q_stride(attnkit::detail::round_up(s.q_len, kW)),
          key_blocks(attnkit::detail::ceil_div(s.kv_len, kStabiliserRows)),
          tables(plan.bias_.empty() ? 1 : plan.bias_.heads()),
          length(plan.use_fft_ ? circulant_length(s.q_len, s.kv_len) : 2),
          twiddles(length),
          spectrum_twiddles(plan.use_fft_ ? length : 2),
          query_shift(
              zeroed(attnkit::detail::thread_scratch<struct RpeQueryShiftTag, T>(s.batch * s.q_heads * q_stride),
                     s.batch * s.q_heads * q_stride)),
          denominator(attnkit::detail::thread_scratch<struct RpeDenominatorTag, T>(s.batch * s.q_heads * q_stride)),
          key_block_max(static_cast<std::size_t>(s.batch * s.q_heads * key_blocks)),
          coefficients(direct_rows == 0 ? 0 : static_cast<std::size_t>(tables * (s.q_len + s.kv_len - 1))),
          spectra(plan.use_fft_ ? attnkit::detail::thread_scratch<struct RpeSpectraTag, T>(tables * 2 * length)
                                : nullptr),
          key_features(direct_rows == 0 ? nullptr
                                        : attnkit::detail::thread_scratch<struct RpeDirectKeysTag, T>(
                                              plan.heads_[0].features() * key_ld)) {
#if defined(ATTNKIT_WITH_FFTW)
      if (plan.use_fft_ && plan.fft_ == RpeFft::kFftw) fftw.emplace(length);  // plans here, outside the region
#endif
    }
    index_t direct_rows;  // rows [0, direct_rows) by the direct sums
    index_t direct_keys;  // the keys those rows reach
    index_t key_ld;
    index_t q_stride, key_blocks, tables, length;
    simd::FftTwiddles<T> twiddles;
    simd::FftTwiddles<double> spectrum_twiddles;
    T* query_shift;  // [B Hq x q_stride]
    T* denominator;  // [B Hq x q_stride]
    std::vector<T> key_block_max;
    std::vector<T> coefficients;  // direct path: per table, c_t at t + Lk - 1 for t in [-(Lk - 1), Lq - 1]
    T* spectra;                   // [tables x L x 2]
    T* key_features;              // direct path: one head's [features x attnkit::detail::round_up(Lk)]
#if defined(ATTNKIT_WITH_FFTW)
    std::optional<FftwEngine<T>> fftw;
#endif
    static T* zeroed(T* data, index_t count) {  // the stabiliser phase fills the rows, not the padding
      std::fill(data, data + count, T(0));
      return data;
    }
    T key_max(index_t bh) const {
      const auto begin = key_block_max.begin() + bh * key_blocks;
      return *std::max_element(begin, begin + key_blocks);
    }
  };

  /// c_t of bias table `table` (its stabiliser, the causal cut).
  double coefficient(index_t table, index_t offset) const {
    if (causal_ && offset > 0) return 0.0;
    return std::exp(bias_.at(table, offset) - bias_max_[static_cast<std::size_t>(table)]);
  }

  template <class Call>
  static const auto* query_rows(const Call& call, index_t b, index_t h) {
    return call.q.row(b, h, 0);
  }
  template <class Call>
  static const auto* key_rows(const Call& call, index_t b, index_t h) {
    return call.k.row(b, h / call.shape.group_size(), 0);
  }

  /// Phase 1.
  template <class Call>
  void stabilise(const Call& call, Workspace& work, parallel::Team& team) const {
    const AttentionShape& s = call.shape;
    const index_t q_blocks = attnkit::detail::ceil_div(s.q_len, kStabiliserRows);
    const index_t per_head = q_blocks + work.key_blocks;
    // One item per bias table (its spectrum, or its coefficients for the direct path), then
    // the row blocks.
    team.for_each_dynamic(work.tables + s.batch * s.q_heads * per_head, [&](index_t item) {
      if (item < work.tables) {
        if (use_fft_) {  // (rows summed directly also need the coefficients below)
          double* scratch = attnkit::detail::thread_scratch<struct RpeSpectrumScratchTag, double>(2 * work.length);
          circulant_spectrum<T>(
              s.q_len, s.kv_len, [&](index_t t) { return coefficient(item, t); }, work.spectrum_twiddles, scratch,
              work.spectra + item * 2 * work.length, fft_ != RpeFft::kLanes);
        }
        if (work.direct_rows > 0) {
          T* c = work.coefficients.data() + item * (s.q_len + s.kv_len - 1);
          for (index_t t = -(s.kv_len - 1); t < s.q_len; ++t)
            c[t + s.kv_len - 1] = static_cast<T>(coefficient(item, t));
        }
        return;
      }
      item -= work.tables;
      const index_t bh = item / per_head, block = item % per_head, b = bh / s.q_heads, h = bh % s.q_heads;
      const FeatureBlocks<T>& map = heads_[static_cast<std::size_t>(h)];
      const bool keys = block >= q_blocks;
      const index_t first = (keys ? block - q_blocks : block) * kStabiliserRows;
      const index_t rows = std::min(kStabiliserRows, (keys ? s.kv_len : s.q_len) - first);
      const auto& view = keys ? call.k : call.q;
      const auto* x = (keys ? key_rows(call, b, h) : query_rows(call, b, h)) + first * view.stride(kSeq);
      T* rho = attnkit::detail::thread_scratch<struct RpeStabiliserRhoTag, T>(
          attnkit::detail::round_up(kStabiliserRows, kW));
      T* half_square = attnkit::detail::thread_scratch<struct RpeStabiliserSquareTag, T>(
          attnkit::detail::round_up(kStabiliserRows, kW));
      T* scratch =
          attnkit::detail::thread_scratch<struct RpeStabiliserProjectionTag, T>(kStabiliserRows * map.features());
      map.row_scales(x, view.stride(kSeq), rows, keys, rho, half_square);
      if (keys) {
        work.key_block_max[static_cast<std::size_t>(bh * work.key_blocks + block - q_blocks)] =
            map.key_max(x, view.stride(kSeq), rows, rho, half_square, scratch);
      } else {
        map.query_shifts(x, view.stride(kSeq), rows, rho, work.query_shift + bh * work.q_stride + first, scratch);
      }
    });
  }

  /// Per-row inputs of one side of a (batch, head), padded to whole vectors.
  struct SideRows {
    const T* rho;
    const T* shift;  // exponential maps: the exponent's subtrahend; TRF: the amplitude
  };
  template <bool kKeys>
  struct SideTag {};
  /// Keys: rho and |x'|^2 / 2 + M (TRF: exp(|x'|^2 / 2 - M)); queries: rho and the row's
  /// stabiliser from phase 1 (TRF: 1).
  template <bool kKeys, class Call>
  SideRows side_rows(const Call& call, const Workspace& work, index_t b, index_t h) const {
    const AttentionShape& s = call.shape;
    const FeatureBlocks<T>& map = heads_[static_cast<std::size_t>(h)];
    const index_t rows = kKeys ? s.kv_len : s.q_len, padded = attnkit::detail::round_up(rows, kW);
    T* rho = attnkit::detail::thread_scratch<SideTag<kKeys>, T>(2 * padded);
    T* shift = rho + padded;
    map.row_scales(kKeys ? key_rows(call, b, h) : query_rows(call, b, h), (kKeys ? call.k : call.q).stride(kSeq), rows,
                   kKeys, rho, shift);
    if constexpr (kKeys) {
      const T key_max = work.key_max(b * s.q_heads + h);
      for (index_t j = 0; j < padded; ++j)
        shift[j] = map.exponential() ? shift[j] + key_max : static_cast<T>(std::exp(shift[j] - key_max));
    } else {
      if (map.exponential()) return SideRows{rho, work.query_shift + (b * s.q_heads + h) * work.q_stride};
      std::fill(shift, shift + padded, T(1));
    }
    return SideRows{rho, shift};
  }

  /// Phase 2, FFT path, on the chosen engine.
  template <class Call>
  void run_fft(const Call& call, Workspace& work, parallel::Team& team) const {
    switch (fft_) {
      case RpeFft::kEigen:
        run_fft(call, work, team, EigenFftEngine<T>(work.length));
        return;
      case RpeFft::kFftw:
#if defined(ATTNKIT_WITH_FFTW)
        run_fft(call, work, team, *work.fftw);
#endif
        return;
      case RpeFft::kLanes:
        break;
    }
    run_fft(call, work, team, LaneFftEngine<T>(work.twiddles));
  }

  template <class Call, class Engine>
  void run_fft(const Call& call, Workspace& work, parallel::Team& team, const Engine& engine) const {
    const AttentionShape& s = call.shape;
    const index_t value_groups = attnkit::detail::ceil_div(s.value_dim, ToeplitzBatch<T>::kColumns);
    const index_t groups = value_groups + 1;  // the last: the denominator
    // Value groups (the heavy items) first, then the denominators.
    team.for_each_dynamic(s.batch * s.q_heads * groups, [&](index_t item) {
      const index_t per_group = s.batch * s.q_heads;
      const index_t group = item < per_group * value_groups ? item / per_group : value_groups;
      const index_t bh = item < per_group * value_groups ? item % per_group : item - per_group * value_groups;
      const index_t b = bh / s.q_heads, h = bh % s.q_heads;
      T* data = attnkit::detail::thread_scratch<struct RpeBatchTag, T>(2 * kW * work.length);
      const ToeplitzBatch<T, Engine> batch(data, engine);
      const T* spectrum = work.spectra + (bias_.heads() > 1 ? h : 0) * 2 * work.length;
      if (group < value_groups) {
        value_group(call, work, batch, spectrum, b, h, group * ToeplitzBatch<T>::kColumns);
      } else {
        denominator_group(call, work, batch, spectrum, b, h);
      }
    });
  }

  struct FeatureScratch {
    T* keys;     // [kFeatureBlock x attnkit::detail::round_up(Lk)]
    T* queries;  // [kFeatureBlock x attnkit::detail::round_up(Lq)]
    index_t key_ld, query_ld;
  };
  static FeatureScratch feature_scratch(const AttentionShape& s) {
    const index_t key_ld = attnkit::detail::round_up(s.kv_len, kW), query_ld = attnkit::detail::round_up(s.q_len, kW);
    return FeatureScratch{attnkit::detail::thread_scratch<struct RpeKeyFeaturesTag, T>(kFeatureBlock * key_ld),
                          attnkit::detail::thread_scratch<struct RpeQueryFeaturesTag, T>(kFeatureBlock * query_ld),
                          key_ld, query_ld};
  }

  using Batch = simd::Batch<T>;
  using Point = typename ToeplitzBatch<T>::Point;
  /// 2 W consecutive columns of a row: [0, W) and [W, 2 W).
  struct GroupColumns {
    Batch low, high;
  };
  /// The first `width` (<= 2 W) of them at x, zero beyond (half values widened).
  template <class S>
  static GroupColumns load_columns(const S* x, index_t width) {
    if constexpr (std::is_same_v<S, T>) {
      if (width == ToeplitzBatch<T>::kColumns)
        return GroupColumns{Batch::load_unaligned(x), Batch::load_unaligned(x + kW)};
    }
    alignas(64) T padded[ToeplitzBatch<T>::kColumns] = {};
    simd::widen_row(x, width, padded);
    return GroupColumns{Batch::load_aligned(padded), Batch::load_aligned(padded + kW)};
  }
  static void store_columns(T* x, index_t width, const GroupColumns& value) {
    if (width == ToeplitzBatch<T>::kColumns) {
      value.low.store_unaligned(x);
      value.high.store_unaligned(x + kW);
      return;
    }
    alignas(64) T padded[ToeplitzBatch<T>::kColumns];
    value.low.store_aligned(padded);
    value.high.store_aligned(padded + kW);
    std::copy(padded, padded + width, x);
  }

  /// out[i][first .. first + 2W) = sum_u phi_q[i][u] (T (phi_k[:, u] * v[:, c]))_i, the
  /// product streamed: its inputs built from v and phi_k as the transform's first pass reads
  /// them, its outputs folded into out as its last pass writes them.
  template <class Call, class Toeplitz>
  void value_group(const Call& call, const Workspace& work, const Toeplitz& batch, const T* spectrum, index_t b,
                   index_t h, index_t first) const {
    const AttentionShape& s = call.shape;
    const FeatureBlocks<T>& map = heads_[static_cast<std::size_t>(h)];
    const index_t width = std::min(ToeplitzBatch<T>::kColumns, s.value_dim - first);
    const index_t kv_head = h / s.group_size();
    const SideRows keys = side_rows<true>(call, work, b, h);
    const SideRows queries = side_rows<false>(call, work, b, h);
    const FeatureScratch f = feature_scratch(s);
    for (index_t u0 = 0; u0 < map.features(); u0 += kFeatureBlock) {
      const index_t count = std::min(kFeatureBlock, map.features() - u0);
      map.features(key_rows(call, b, h), call.k.stride(kSeq), s.kv_len, u0, count, keys.rho, keys.shift, f.keys,
                   f.key_ld);
      map.features(query_rows(call, b, h), call.q.stride(kSeq), s.q_len, u0, count, queries.rho, queries.shift,
                   f.queries, f.query_ld);
      for (index_t u = 0; u < count; ++u) {
        const T* phi_k = f.keys + u * f.key_ld;
        const T* phi_q = f.queries + u * f.query_ld;
        const bool first_feature = u0 + u == 0;
        batch.transform(
            spectrum, s.kv_len,
            [&](index_t j) {
              const Batch weight(phi_k[j]);
              const GroupColumns x = load_columns(call.v.row(b, kv_head, j) + first, width);
              return Point{weight * x.low, weight * x.high};
            },
            s.q_len,
            [&](index_t i, const Point& y) {
              T* o = call.out.row(b, h, i) + first;
              const Batch weight(phi_q[i]);
              if (first_feature) {
                store_columns(o, width, GroupColumns{weight * y.re, weight * y.im});
              } else {
                const GroupColumns sum = load_columns(o, width);
                store_columns(o, width,
                              GroupColumns{simd::fma(weight, y.re, sum.low), simd::fma(weight, y.im, sum.high)});
              }
            });
      }
    }
  }

  /// den_i = sum_u phi_q[i][u] (T phi_k[:, u])_i, 2 W features per batch.
  template <class Call, class Toeplitz>
  void denominator_group(const Call& call, const Workspace& work, const Toeplitz& batch, const T* spectrum, index_t b,
                         index_t h) const {
    const AttentionShape& s = call.shape;
    const FeatureBlocks<T>& map = heads_[static_cast<std::size_t>(h)];
    const SideRows keys = side_rows<true>(call, work, b, h);
    const SideRows queries = side_rows<false>(call, work, b, h);
    const FeatureScratch f = feature_scratch(s);
    T* den = work.denominator + (b * s.q_heads + h) * work.q_stride;
    constexpr index_t kColumns = ToeplitzBatch<T>::kColumns;
    for (index_t group = 0; group < map.features(); group += kColumns) {
      const index_t group_end = std::min(map.features(), group + kColumns);
      if (group_end - group < kColumns) std::fill(batch.point(0), batch.point(s.kv_len), T(0));  // the unused lanes
      for (index_t u0 = group; u0 < group_end; u0 += kFeatureBlock) {
        const index_t count = std::min(kFeatureBlock, map.features() - u0);
        map.features(key_rows(call, b, h), call.k.stride(kSeq), s.kv_len, u0, count, keys.rho, keys.shift, f.keys,
                     f.key_ld);
        for (index_t u = 0; u < count; ++u) {
          const T* phi_k = f.keys + u * f.key_ld;
          for (index_t j = 0; j < s.kv_len; ++j) batch.point(j)[u0 - group + u] = phi_k[j];
        }
      }
      batch.transform(spectrum, s.kv_len, s.q_len);
      for (index_t u0 = group; u0 < group_end; u0 += kFeatureBlock) {
        const index_t count = std::min(kFeatureBlock, map.features() - u0);
        map.features(query_rows(call, b, h), call.q.stride(kSeq), s.q_len, u0, count, queries.rho, queries.shift,
                     f.queries, f.query_ld);
        for (index_t i = 0; i < s.q_len; ++i) {
          T sum = u0 == 0 ? T(0) : den[i];
          const T* y = batch.point(i) + (u0 - group);
          for (index_t u = 0; u < count; ++u) sum = std::fma(f.queries[u * f.query_ld + i], y[u], sum);
          den[i] = sum;
        }
      }
    }
  }

  /// Phase 2, direct path (or after the FFT, its directly summed rows): per (batch, head),
  /// phi_k of the keys those rows reach, then query blocks.
  template <class Call>
  void run_direct(const Call& call, Workspace& work, parallel::Team& team) const {
    const AttentionShape& s = call.shape;
    const index_t key_ld = work.key_ld;
    for (index_t bh = 0; bh < s.batch * s.q_heads; ++bh) {
      const index_t b = bh / s.q_heads, h = bh % s.q_heads;
      const FeatureBlocks<T>& map = heads_[static_cast<std::size_t>(h)];
      const index_t blocks = attnkit::detail::ceil_div(map.features(), kFeatureBlock);
      team.for_each_dynamic(blocks, [&](index_t block) {
        const SideRows keys = side_rows<true>(call, work, b, h);
        const index_t u0 = block * kFeatureBlock;
        map.features(key_rows(call, b, h), call.k.stride(kSeq), work.direct_keys, u0,
                     std::min(kFeatureBlock, map.features() - u0), keys.rho, keys.shift,
                     work.key_features + u0 * key_ld, key_ld);
      });
      team.for_each_dynamic(attnkit::detail::ceil_div(work.direct_rows, kDirectRows),
                            [&](index_t block) { direct_rows(call, work, b, h, block); });
    }
  }

  template <class Call>
  void direct_rows(const Call& call, const Workspace& work, index_t b, index_t h, index_t block) const {
    const AttentionShape& s = call.shape;
    const FeatureBlocks<T>& map = heads_[static_cast<std::size_t>(h)];
    const index_t m = map.features(), key_ld = work.key_ld, first = block * kDirectRows;
    const index_t rows = std::min(kDirectRows, work.direct_rows - first), shift = s.kv_len - s.q_len;
    const auto* x = query_rows(call, b, h) + first * call.q.stride(kSeq);
    T* rho = attnkit::detail::thread_scratch<struct RpeDirectRhoTag, T>(kDirectRows);
    T* amplitude = attnkit::detail::thread_scratch<struct RpeDirectAmplitudeTag, T>(kDirectRows);
    map.row_scales(x, call.q.stride(kSeq), rows, false, rho, amplitude);
    std::fill(amplitude, amplitude + kDirectRows, T(1));
    const T* query_shift =
        map.exponential() ? work.query_shift + (b * s.q_heads + h) * work.q_stride + first : amplitude;
    // phi_q of the block: [m x kDirectRows] by feature, then row-major [rows x m].
    T* by_feature = attnkit::detail::thread_scratch<struct RpeDirectQueryColumnsTag, T>(m * kDirectRows);
    T* phi_q = attnkit::detail::thread_scratch<struct RpeDirectQueryRowsTag, T>(kDirectRows * m);
    T* scores = attnkit::detail::thread_scratch<struct RpeDirectScoresTag, T>(kDirectRows * kDirectKeys);
    T* num = attnkit::detail::thread_scratch<struct RpeDirectNumeratorTag, T>(kDirectRows * s.value_dim);
    T* den = work.denominator + (b * s.q_heads + h) * work.q_stride + first;
    for (index_t u0 = 0; u0 < m; u0 += kFeatureBlock) {
      map.features(x, call.q.stride(kSeq), rows, u0, std::min(kFeatureBlock, m - u0), rho, query_shift,
                   by_feature + u0 * kDirectRows, kDirectRows);
    }
    for (index_t i = 0; i < rows; ++i)
      for (index_t u = 0; u < m; ++u) phi_q[i * m + u] = by_feature[u * kDirectRows + i];
    std::fill(num, num + rows * s.value_dim, T(0));
    std::fill(den, den + rows, T(0));
    // Keys past the last query's position are never attended when causal.
    const index_t key_end = causal_ ? std::clamp<index_t>(first + rows + shift, 0, s.kv_len) : s.kv_len;
    const index_t kv_head = h / s.group_size();
    const T* c = work.coefficients.data() + (bias_.heads() > 1 ? h : 0) * (s.q_len + s.kv_len - 1) + s.kv_len - 1;
    for (index_t j0 = 0; j0 < key_end; j0 += kDirectKeys) {
      const index_t keys = std::min(kDirectKeys, key_end - j0);
      std::fill(scores, scores + rows * keys, T(0));
      gemm_accumulate<T>(rows, keys, m, phi_q, m, work.key_features + j0, key_ld, scores, keys);
      for (index_t i = 0; i < rows; ++i) {
        T sum = den[i];
        for (index_t j = 0; j < keys; ++j) {
          T& score = scores[i * keys + j];
          score *= c[j0 + j - (first + i) - shift];
          sum += score;
        }
        den[i] = sum;
      }
      if constexpr (std::is_same_v<typename Call::key_value_type, T>) {
        gemm_accumulate<T>(rows, s.value_dim, keys, scores, keys, call.v.row(b, kv_head, j0), call.v.stride(kSeq), num,
                           s.value_dim);
      } else {  // half V widened one key block at a time
        T* values = attnkit::detail::thread_scratch<struct RpeDirectValuesTag, T>(kDirectKeys * s.value_dim);
        for (index_t j = 0; j < keys; ++j)
          simd::widen_row(call.v.row(b, kv_head, j0 + j), s.value_dim, values + j * s.value_dim);
        gemm_accumulate<T>(rows, s.value_dim, keys, scores, keys, values, s.value_dim, num, s.value_dim);
      }
    }
    for (index_t i = 0; i < rows; ++i)
      std::copy(num + i * s.value_dim, num + (i + 1) * s.value_dim, call.out.row(b, h, first + i));
  }

  /// Phase 3: o_i = num_i / den_i, 0 where den_i is exactly 0, the numerators in call.out,
  /// the quotients into `result` (call.out itself, or a half out they narrow into).
  template <class Call, class Output>
  void divide(const Call& call, const Workspace& work, index_t bh, const TensorView<Output>& result) const {
    const AttentionShape& s = call.shape;
    const index_t b = bh / s.q_heads, h = bh % s.q_heads;
    const T* den = work.denominator + bh * work.q_stride;
    for (index_t i = 0; i < s.q_len; ++i) {
      T* o = call.out.row(b, h, i);
      if (den[i] == T(0)) {
        std::fill(o, o + s.value_dim, T(0));
      } else {  // a quotient, not o times 1 / den: a subnormal den has no finite reciprocal
        const T divisor = den[i];
        for (index_t d = 0; d < s.value_dim; ++d) o[d] /= divisor;
      }
      if constexpr (!std::is_same_v<Output, T>) simd::narrow_row(o, s.value_dim, result.row(b, h, i));
    }
  }

  std::vector<FeatureBlocks<T>> heads_;
  RpeBias bias_;
  std::vector<double> bias_max_;  // max b of each table, the stabiliser of c_t
  bool causal_;
  bool use_fft_;
  index_t direct_rows_;
  RpeFft fft_;
};

}  // namespace attnkit::kernel
