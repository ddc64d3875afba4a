#pragma once
// Reformer LSH's hashing and sorting (SPEC.md section 7, steps 1-2): random rotations, bucket
// ids by GEMM and signed argmax, and the stable counting sort of one round by bucket.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/rng.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/kernel/sequential_gemm.hpp"
#include "attnkit/parallel/team.hpp"
#include "attnkit/simd/argmax.hpp"
#include "attnkit/simd/convert.hpp"

namespace attnkit::kernel {

/// The bucket count of one call as factors f_1 .. f_k (each even; k = 1 for a plain count):
/// a round's rotation has columns = sum f_i / 2 columns, consecutive groups of f_i / 2 per
/// factor, and bucket = sum_i argmax_i * prod_{m < i} f_m with argmax_i taken over
/// [y_group, -y_group] of group i: the first factor is the least significant digit (trax and
/// HF Reformer's factorized num_buckets). buckets = prod f_i.
struct LshBucketLayout {
  std::vector<index_t> factors;
  index_t columns = 0;
  index_t buckets = 0;

  explicit LshBucketLayout(std::vector<index_t> bucket_factors) : factors(std::move(bucket_factors)), buckets(1) {
    for (index_t f : factors) {
      columns += f / 2;
      buckets *= f;
    }
  }
};

/// Entry Rot[d][r][c] of head h's generated rotation (SPEC.md section 7: N(0, 1), from the
/// counter-based generator keyed by (seed, layer, head, index) with index = (r D + d) columns
/// + c), rounded to float: the same value for any thread count, batch composition or number
/// of rounds (round r's slice does not depend on R), and the same float for float and double
/// calls, so both precisions hash with one rotation.
inline float rotation_entry(std::uint64_t seed, std::uint64_t layer, index_t head, index_t round, index_t d,
                            index_t column, index_t dim, index_t columns) {
  const index_t index = (round * dim + d) * columns + column;
  return static_cast<float>(
      normal_from_counter(seed, layer, static_cast<std::uint64_t>(head), static_cast<std::uint64_t>(index)));
}

/// Where a call's rotations come from: given floats [P][D][R][columns] (P = 1, shared by
/// every head, or one per head; the layout of HF Reformer's random_rotations), or, when
/// `given` is null, rotation_entry's draws.
struct LshRotationSource {
  const float* given = nullptr;
  index_t given_heads = 1;
  std::uint64_t seed = 0;
  std::uint64_t layer = 0;

  /// row[r columns + c] = Rot[d][r][c] of head h, in T.
  template <class T>
  void fill_row(index_t h, index_t d, index_t dim, index_t rounds, index_t columns, T* row) const {
    for (index_t r = 0; r < rounds; ++r) {
      for (index_t c = 0; c < columns; ++c) {
        row[r * columns + c] =
            given != nullptr
                ? static_cast<T>(given[((table_of_head(given_heads, h) * dim + d) * rounds + r) * columns + c])
                : static_cast<T>(rotation_entry(seed, layer, h, r, d, c, dim, columns));
      }
    }
  }
};

/// Rows hashed per GEMM: enough to amortise packing the rotation, few enough that the
/// rotated block (R columns x kHashRows) stays in L2 while it is scanned.
inline constexpr index_t kHashRows = 256;

/// Elements of hash_rows' scratch.
template <class T>
constexpr index_t hash_scratch_size(index_t rounds, index_t columns) {
  return rounds * columns * attnkit::detail::round_up(kHashRows, static_cast<index_t>(simd::kWidth<T>));
}

/// Bucket ids of rows [first, last) of one (batch, head): ids[r n + i] for every round r.
///   block: row i at block + (i - first) * x_stride (D elements); rotation: [D x R columns] row-major in T
///   (Rot[d][r][c] at d * R columns + r columns + c); scratch: hash_scratch_size elements,
///   aligned.
/// y = x_i^T Rot for the whole block by one GEMM (kernel::gemm_accumulate) into a column-major
/// block, then per round and factor the signed argmax of SPEC.md step 1 across rows.
/// last - first <= kHashRows. The result depends only on the inputs and the block's rows, so
/// blocks fixed by position make it thread-count independent.
template <class T>
void hash_rows(const T* block, index_t x_stride, index_t first, index_t last, index_t dim, const T* rotation,
               const LshBucketLayout& layout, index_t rounds, index_t n, std::int32_t* ids, T* scratch) {
  const index_t width = rounds * layout.columns;
  const index_t rows = last - first;
  const index_t padded_rows = attnkit::detail::round_up(rows, static_cast<index_t>(simd::kWidth<T>));
  std::fill(scratch, scratch + padded_rows * width, T(0));
  gemm_accumulate<T, true>(rows, width, dim, block, x_stride, rotation, width, scratch, padded_rows);
  for (index_t r = 0; r < rounds; ++r) {
    std::int32_t* bucket = ids + r * n + first;
    std::fill(bucket, bucket + rows, std::int32_t{0});
    const T* y = scratch + r * layout.columns * padded_rows;
    std::int32_t place = 1;
    for (index_t f : layout.factors) {
      simd::add_signed_argmax(y, padded_rows, f / 2, padded_rows, rows, place, bucket);
      place *= static_cast<std::int32_t>(f);
      y += f / 2 * padded_rows;
    }
  }
}

/// The hashing Lsh::hash and LshPlan share: every head's rotation in T (fill, by the team,
/// once per call), then bucket ids block by block, so both see the same ids bit for bit.
template <class T>
class LshHasher {
 public:
  LshHasher(const LshRotationSource& source, const LshBucketLayout& layout, index_t heads, index_t dim, index_t rounds)
      : source_(source),
        layout_(layout),
        dim_(dim),
        rounds_(rounds),
        width_(rounds * layout.columns),
        rotations_(static_cast<std::size_t>(heads * dim * width_)),
        heads_(heads) {}

  /// Every member of the team calls it; all rotations are filled when it returns.
  void fill(parallel::Team& team) {
    team.for_each_static(heads_ * dim_, [&](index_t item) {
      source_.fill_row(item / dim_, item % dim_, dim_, rounds_, layout_.columns, rotations_.data() + item * width_);
    });
  }
  /// Blocks of kHashRows rows of an n-row head.
  static index_t blocks(index_t n) { return attnkit::detail::ceil_div(n, kHashRows); }
  /// ids[r n + i] for the rows i of block `block` of head h (row i at x + i * x_stride, of
  /// T, or of a half type whose block is first widened exactly to T).
  template <class S>
  void hash_block(const S* x, index_t x_stride, index_t n, index_t h, index_t block, std::int32_t* ids) const {
    T* rotated =
        attnkit::detail::thread_scratch<struct LshRotatedTag, T>(hash_scratch_size<T>(rounds_, layout_.columns));
    const index_t first = block * kHashRows, last = std::min(n, first + kHashRows);
    const T* rows = nullptr;
    index_t stride = x_stride;
    if constexpr (std::is_same_v<S, T>) {
      rows = x + first * x_stride;
    } else {
      T* widened = attnkit::detail::thread_scratch<struct LshWidenedRowsTag, T>(kHashRows * dim_);
      for (index_t i = first; i < last; ++i) simd::widen_row(x + i * x_stride, dim_, widened + (i - first) * dim_);
      rows = widened;
      stride = dim_;
    }
    hash_rows<T>(rows, stride, first, last, dim_, rotations_.data() + h * dim_ * width_, layout_, rounds_, n, ids,
                 rotated);
  }

 private:
  LshRotationSource source_;
  LshBucketLayout layout_;
  index_t dim_, rounds_, width_;
  std::vector<T> rotations_;  // [H][D][R columns]
  index_t heads_;
};

/// norms[i] = sqrt(||x_i||^2 + offset) and inverse[i] = 1 / norms[i] for rows [first, last):
/// the scale of the normalised key k_i = x_i / norms[i] (offset 0: unit keys; D 1e-6: HF's)
/// and the factor that turns it back into the query x_i. A zero row with offset 0 (SPEC.md
/// step 4's guard), or one whose squared norm overflows T (entries near sqrt of T's largest
/// value), gets 0 for both: a zero key and a zero query. x holds T or a half type (widened
/// exactly).
template <class T, class S>
void row_norms(const S* x, index_t x_stride, index_t first, index_t last, index_t dim, T offset, T* norms, T* inverse) {
  for (index_t i = first; i < last; ++i) {
    const S* row = x + i * x_stride;
    T squares = offset;
    for (index_t d = 0; d < dim; ++d) squares += widen(row[d]) * widen(row[d]);
    const bool usable = squares > T(0) && squares <= std::numeric_limits<T>::max();
    norms[i] = usable ? std::sqrt(squares) : T(0);
    inverse[i] = usable ? T(1) / norms[i] : T(0);
  }
}

/// Marks a slot of the sorted sequence that holds no row (a round padded to whole chunks).
inline constexpr std::int32_t kPaddingSlot = INT32_MAX;

/// One round's rows sorted stably by bucket (increasing row within a bucket: SPEC.md step 2's
/// order (r, bucket, i)), by counting sort in O(n + buckets): order[t] for t < n, then
/// order[t] = kPaddingSlot for t in [n, padded). ids: the round's n bucket ids, each in
/// [0, buckets); counts: buckets + 1 scratch.
inline void sort_round(const std::int32_t* ids, index_t n, index_t padded, index_t buckets, std::int32_t* order,
                       index_t* counts) {
  std::fill(counts, counts + buckets + 1, index_t(0));
  for (index_t i = 0; i < n; ++i) ++counts[ids[i] + 1];
  for (index_t bucket = 0; bucket < buckets; ++bucket) counts[bucket + 1] += counts[bucket];
  for (index_t i = 0; i < n; ++i) order[counts[ids[i]]++] = static_cast<std::int32_t>(i);
  std::fill(order + n, order + padded, kPaddingSlot);
}

}  // namespace attnkit::kernel
