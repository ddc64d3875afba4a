#pragma once
// Linformer's projections along the sequence (SPEC.md section 8): K' = E[:, :Lk] K and
// V' = F[:, :Lk] V per (batch, kv head), as independent GEMM items for a thread team.

#include <algorithm>
#include <span>
#include <type_traits>

#include "attnkit/core/index.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/kernel/sequential_gemm.hpp"
#include "attnkit/simd/convert.hpp"

namespace attnkit::kernel {

/// A non-owning view of Linformer's projection matrices: `heads` row-major [kp x n_max]
/// matrices back to back (heads = 1: shared by every kv head).
struct ProjectionMatrices {
  const float* data = nullptr;
  index_t heads = 1;

  /// The matrix kv head h uses.
  const float* of(index_t h, index_t kp, index_t n_max) const { return data + table_of_head(heads, h) * kp * n_max; }
};

/// out[b, h] = P_h[:, :len_b] x[b, h, :len_b] for every (batch, kv head) and both projections
/// (keys through E, values through F), with len_b the valid keys of batch element b (padded
/// rows are never read: projecting them as zero rows adds nothing). Items are
/// (batch, kv head, K or V, block of projected rows); each is one GEMM written by one
/// thread, and the blocks depend on the shape only, so results do not depend on the thread
/// count. K and V hold S: T, or a half type whose rows widen to T (float) a block of keys at a
/// time (no T copy of the whole tensor).
template <class T, class S = T>
class SequenceProjection {
 public:
  /// Blocks are as tall as the shape allows while giving at least kMinItems items: Eigen's
  /// GEMM ran 138 GFLOP/s on one AMD EPYC core with 64 projected rows x 64 columns x 16384
  /// keys and 167 GFLOP/s with 256 rows (more rows per packed K block); B Hk = 8 heads give
  /// 16 whole-kp items, a single kv head is split into blocks of at least kMinRows rows.
  static constexpr index_t kMinItems = 16;
  static constexpr index_t kMinRows = 64;

  /// keys_out [B, Hk, kp, D] and values_out [B, Hk, kp, Dv]; key_lengths empty (all Lk <= n_max
  /// rows valid) or one validated length per batch element, viewed for the projection's life.
  SequenceProjection(index_t kp, index_t n_max, ProjectionMatrices e, ProjectionMatrices f, TensorView<const S> k,
                     TensorView<const S> v, TensorView<T> keys_out, TensorView<T> values_out,
                     std::span<const index_t> key_lengths)
      : kp_(kp),
        n_max_(n_max),
        e_(e),
        f_(f),
        k_(k),
        v_(v),
        keys_out_(keys_out),
        values_out_(values_out),
        key_lengths_(key_lengths) {
    using attnkit::detail::ceil_div;
    const index_t gemms = std::max<index_t>(1, 2 * k.batch() * k.heads());
    const index_t blocks = std::clamp<index_t>(ceil_div(kMinItems, gemms), 1, ceil_div(kp, kMinRows));
    rows_per_item_ = ceil_div(kp, blocks);
  }

  index_t items() const { return k_.batch() * k_.heads() * 2 * blocks(); }

  void run_item(index_t item) const {
    const index_t block = item % blocks();
    const bool values = (item / blocks()) % 2 == 1;
    const index_t h = (item / (2 * blocks())) % k_.heads();
    const index_t b = item / (2 * blocks() * k_.heads());
    const TensorView<const S>& x = values ? v_ : k_;
    const TensorView<T>& out = values ? values_out_ : keys_out_;
    const float* matrix = (values ? f_ : e_).of(h, kp_, n_max_);
    const index_t first = block * rows_per_item_, rows = std::min(rows_per_item_, kp_ - first);
    const index_t depth = key_lengths_.empty() ? x.seq() : key_lengths_[static_cast<std::size_t>(b)];
    T* result = out.row(b, h, first);
    const index_t width = x.dim(), ld = out.stride(kSeq);
    for (index_t r = 0; r < rows; ++r) std::fill(result + r * ld, result + r * ld + width, T(0));
    if (depth == 0) return;
    const float* lhs = matrix + first * n_max_;
    if constexpr (std::is_same_v<T, float> && std::is_same_v<S, float>) {
      gemm_accumulate<T>(rows, width, depth, lhs, n_max_, x.row(b, h, 0), x.stride(kSeq), result, ld);
    } else if constexpr (std::is_same_v<T, float>) {
      // Half rows widened kKeys at a time (exact) and multiplied in float.
      constexpr index_t kKeys = 256;
      T* widened = attnkit::detail::thread_scratch<struct WidenedSequenceTag, T>(kKeys * width);
      for (index_t c0 = 0; c0 < depth; c0 += kKeys) {
        const index_t keys = std::min(kKeys, depth - c0);
        for (index_t c = 0; c < keys; ++c) simd::widen_row(x.row(b, h, c0 + c), width, widened + c * width);
        gemm_accumulate<T>(rows, width, keys, lhs + c0, n_max_, widened, width, result, ld);
      }
    } else {
      // The float projection widened to T one column block at a time (exact), so the GEMM
      // runs in T without a T copy of the whole matrix.
      constexpr index_t kColumns = 1024;
      T* widened = attnkit::detail::thread_scratch<struct WidenedProjectionTag, T>(rows_per_item_ * kColumns);
      for (index_t c0 = 0; c0 < depth; c0 += kColumns) {
        const index_t columns = std::min(kColumns, depth - c0);
        for (index_t r = 0; r < rows; ++r)
          for (index_t c = 0; c < columns; ++c) widened[r * columns + c] = static_cast<T>(lhs[r * n_max_ + c0 + c]);
        gemm_accumulate<T>(rows, width, columns, widened, columns, x.row(b, h, c0), x.stride(kSeq), result, ld);
      }
    }
  }

 private:
  index_t blocks() const { return attnkit::detail::ceil_div(kp_, rows_per_item_); }

  index_t kp_, n_max_;
  index_t rows_per_item_ = 1;
  ProjectionMatrices e_, f_;
  TensorView<const S> k_, v_;
  TensorView<T> keys_out_, values_out_;
  std::span<const index_t> key_lengths_;
};

}  // namespace attnkit::kernel
