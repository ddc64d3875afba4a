#pragma once
// attnkit::Lsh: Reformer's shared-QK LSH attention (SPEC.md section 7; Kitaev, Kaiser,
// Levskaya, arXiv 2001.04451).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/cost.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"
#include "attnkit/kernel/lsh_hashing.hpp"
#include "attnkit/kernel/lsh_plan.hpp"
#include "attnkit/parallel/team.hpp"

namespace attnkit {

/// An Lsh's bucket count: automatic (0, the default), one even count (`lsh.buckets = 512`),
/// or factors as trax and HF Reformer write num_buckets (`lsh.buckets = {64, 128}`: 8192
/// buckets hashed with 32 + 64 rotation columns instead of 4096; see kernel::LshBucketLayout).
class LshBuckets {
 public:
  LshBuckets() = default;
  LshBuckets(index_t count) {  // NOLINT(google-explicit-constructor): `buckets = 512` reads as the paper does
    if (count != 0) factors_.push_back(count);
  }
  LshBuckets(std::initializer_list<index_t> factors) : factors_(factors) {
    if (factors_.size() == 1 && factors_[0] == 0) factors_.clear();
  }

  bool automatic() const { return factors_.empty(); }
  /// The factors as given (one for a plain count; empty when automatic).
  const std::vector<index_t>& factors() const { return factors_; }

  friend bool operator==(const LshBuckets&, const LshBuckets&) = default;

 private:
  std::vector<index_t> factors_;
};

/// Bucket ids of one call, ids(b, h, r, i) in [0, buckets) for batch b, head h, round r, row
/// i; stored [B][H][R][n].
class LshBucketIds {
 public:
  LshBucketIds(index_t batch, index_t heads, index_t rounds, index_t n, index_t buckets)
      : batch_(batch),
        heads_(heads),
        rounds_(rounds),
        n_(n),
        buckets_(buckets),
        ids_(static_cast<std::size_t>(batch * heads * rounds * n)) {}

  std::int32_t operator()(index_t b, index_t h, index_t r, index_t i) const {
    return ids_[static_cast<std::size_t>(((b * heads_ + h) * rounds_ + r) * n_ + i)];
  }
  /// The [R][n] ids of (b, h).
  std::int32_t* of(index_t b, index_t h) { return ids_.data() + (b * heads_ + h) * rounds_ * n_; }
  const std::int32_t* of(index_t b, index_t h) const { return ids_.data() + (b * heads_ + h) * rounds_ * n_; }

  index_t batch() const { return batch_; }
  index_t heads() const { return heads_; }
  index_t rounds() const { return rounds_; }
  index_t seq_len() const { return n_; }
  index_t buckets() const { return buckets_; }

 private:
  index_t batch_, heads_, rounds_, n_, buckets_;
  std::vector<std::int32_t> ids_;
};

/// Shared-QK LSH attention: attention(lsh, x, x, v, out[, lse], options) with k the same view
/// as q. Per (batch, head) each of `rounds` hash rounds sorts the n rows by bucket, cuts the
/// R n sorted occurrences into chunks of `chunk`, and every occurrence attends its chunk and
/// `before` / `after` neighbouring chunks (circularly over all rounds); logits are
/// sigma <x_i, k_j>, k_j = x_j / sqrt(||x_j||^2 + D key_epsilon) (sigma = Options::scale, default
/// 1/sqrt(D); key_epsilon 0: the unit keys x_j / ||x_j|| of the paper) with -1e5 added at
/// the query's own row, causal keys after the query excluded, and the rounds merged by their
/// log-sum-exp: one softmax with mu_ij = sum_r M_r[i][j] (SPEC.md section 7). n <= chunk is
/// one round of full shared-QK attention with the self penalty.
///   chunk (64), rounds (1), before (1), after (0), causal (false): as in HF's
///     lsh_attn_chunk_length, num_hashes, lsh_num_chunks_before / after, is_decoder.
///   buckets: 0 = automatic, HF's rule 2^floor(log2(2 floor(n / chunk))) (at least 2), split
///     into the factors [2^(p/2), 2^(p - p/2)] when it exceeds 2 max(floor(sqrt(M / chunk)),
///     chunk) with M = max_positions (HF's max_position_embeddings; 0 = the call's n), which
///     keeps hashing O(n^1.5 / chunk^0.5) instead of O(n^2 / chunk); or an even count; or
///     even factors {f1, f2, ...} (kernel::LshBucketLayout).
///   seed, layer: key the rotations' generator; rotations: empty (drawn: N(0, 1) entries from
///     kernel::rotation_entry, keyed by seed, layer, head and round), or given floats
///     [P][D][R][columns] (HF's random_rotations layout; P = 1 shared, or one per head).
///   key_epsilon (0): HF's and trax's key normalisation is x / sqrt(||x||^2 + D 1e-6) (their
///     _len_and_dim_norm with epsilon 1e-6): key_epsilon = 1e-6 reproduces it, where 0 differs
///     by a relative D 1e-6 / ||x||^2 (1.6e-6 in float64 on their test inputs).
/// Honest limits: Lq = Lk = n < 2^31; no key padding (Options::key_lengths) and no GQA; a row
/// whose squared norm is 0, NaN or beyond T's range acts as a zero vector (key and query).
/// HF and trax checkpoints: they scale keys to x / sqrt(||x||^2 + D 1e-6) and use no further
/// scale, so Options::scale = 1 reproduces their logits (see the README).
struct Lsh {
  index_t chunk = 64;
  index_t rounds = 1;
  LshBuckets buckets = 0;
  index_t before = 1;
  index_t after = 0;
  bool causal = false;
  std::uint64_t seed = 0;
  std::uint64_t layer = 0;
  index_t max_positions = 0;
  std::vector<float> rotations{};
  double key_epsilon = 0.0;

  /// The call's bucket factors for sequence length n (the automatic rule resolved).
  std::vector<index_t> bucket_factors(index_t n) const {
    if (!buckets.automatic()) return buckets.factors();
    const index_t chunks = chunk > 0 ? n / chunk : 0;
    int power = 1;
    while (chunks > 0 && (index_t{2} << power) <= 2 * chunks) ++power;  // floor(log2(2 chunks)), at least 1
    const index_t count = index_t{1} << power;
    const index_t longest = max_positions > 0 ? max_positions : n;
    // count <= 2 max(floor(sqrt(M / chunk)), chunk), halved on both sides (chunk may be INT64_MAX).
    const index_t half_limit =
        std::max(static_cast<index_t>(std::sqrt(static_cast<double>(longest / std::max<index_t>(chunk, 1)))), chunk);
    if (count / 2 <= half_limit) return {count};
    return {index_t{1} << (power / 2), index_t{1} << (power - power / 2)};
  }
  /// Rotation columns per round and the total bucket count for sequence length n.
  kernel::LshBucketLayout bucket_layout(index_t n) const { return kernel::LshBucketLayout(bucket_factors(n)); }

  /// Head h's rotation for head dimension `dim` and sequence length n, [D][R][columns]
  /// floats (Rot[d][r][c] at (d R + r) columns + c): the given one, or the drawn one.
  std::vector<float> rotation(index_t head, index_t dim, index_t n) const {
    const kernel::LshBucketLayout layout = bucket_layout(n);
    std::vector<float> values(static_cast<std::size_t>(dim * rounds * layout.columns));
    const kernel::LshRotationSource source = rotation_source(dim, layout);
    for (index_t d = 0; d < dim; ++d)
      source.fill_row(head, d, dim, rounds, layout.columns, values.data() + d * rounds * layout.columns);
    return values;
  }

  /// The bucket ids of every row and round of q [B, H, n, D] (SPEC.md step 1), computed as
  /// attention computes them (so a reference given these ids meets the kernel's). Threads
  /// from options.threads; the ids do not depend on them.
  template <ElementType T>
  LshBucketIds hash(std::type_identity_t<TensorView<const T>> q, const Options& options = {}) const {
    using Compute = compute_type_t<T>;
    detail::validate_view("q", q, 1);
    if (options.threads < 0) detail::reject("options.threads", options.threads, "must be >= 0 (0 = OpenMP default)");
    const AttentionShape shape{q.batch(), q.heads(), q.heads(), q.seq(), q.seq(), q.dim(), 1};
    validate(shape);
    const index_t n = q.seq(), dim = q.dim();
    const kernel::LshBucketLayout layout = bucket_layout(n);
    LshBucketIds ids(q.batch(), q.heads(), rounds, n, layout.buckets);
    kernel::LshHasher<Compute> hasher(rotation_source(dim, layout), layout, q.heads(), dim, rounds);
    const index_t blocks = kernel::LshHasher<Compute>::blocks(n);
    const double flops = 2.0 * static_cast<double>(q.batch() * q.heads() * n * dim * rounds * layout.columns);
    parallel::parallel_region(parallel::resolve_threads(options.threads, flops), [&](parallel::Team& team) {
      hasher.fill(team);
      team.for_each_static(q.batch() * q.heads() * blocks, [&](index_t item) {
        const index_t b = item / (q.heads() * blocks), h = item / blocks % q.heads();
        hasher.hash_block(q.row(b, h, 0), q.stride(kSeq), n, h, item % blocks, ids.of(b, h));
      });
    });
    return ids;
  }

  /// Throws attnkit::invalid_argument unless the parameters can run on `shape`: chunk >= 1,
  /// rounds in [1, 2^20], before and after in [0, 2^20], even bucket factors in [2, 2^24] whose product is
  /// at most 2^30, Lq = Lk < 2^31, Hq = Hk, given rotations of P * D * R * columns floats.
  void validate(const AttentionShape& shape) const {
    // Bounds on rounds, before and after keep R n occurrences, R (buckets + 1) counts and a
    // window's (before + 1 + after) chunk slots far inside int64 for any n < 2^31.
    constexpr index_t kMaxCount = index_t{1} << 20;
    if (chunk < 1) detail::reject("Lsh.chunk", chunk, "must be >= 1 (slots per chunk)");
    if (rounds < 1 || rounds > kMaxCount) detail::reject("Lsh.rounds", rounds, "must lie in [1, 2^20] (hash rounds)");
    if (before < 0 || before > kMaxCount) {
      detail::reject("Lsh.before", before, "must lie in [0, 2^20] (chunks attended before a slot's own)");
    }
    if (after < 0 || after > kMaxCount)
      detail::reject("Lsh.after", after, "must lie in [0, 2^20] (chunks attended after a slot's own)");
    if (max_positions < 0) detail::reject("Lsh.max_positions", max_positions, "must be >= 0 (0 = the call's n)");
    if (!(key_epsilon >= 0.0 && key_epsilon <= 1.0)) {
      detail::reject("Lsh.key_epsilon", key_epsilon, "must lie in [0, 1] (keys x / sqrt(||x||^2 + D key_epsilon))");
    }
    index_t total = 1;
    for (index_t f : buckets.factors()) {
      if (f < 2 || f % 2 != 0) {
        detail::reject("Lsh.buckets", f, "bucket counts and factors must be even and >= 2 (argmax over [y, -y])");
      }
      if (f > (index_t{1} << 24)) detail::reject("Lsh.buckets", f, "each bucket count or factor must be <= 2^24");
      if (__builtin_mul_overflow(total, f, &total) || total > (index_t{1} << 30)) {
        detail::reject("Lsh.buckets", f, "the product of the bucket factors must be <= 2^30");
      }
    }
    if (shape.kv_len != shape.q_len) {
      detail::reject("k.sizes[seq]", shape.kv_len,
                     "must equal q.sizes[seq] = " + std::to_string(shape.q_len) + " (LSH shares queries and keys)");
    }
    if (shape.kv_heads != shape.q_heads) {
      detail::reject("k.sizes[heads]", shape.kv_heads,
                     "must equal q.sizes[heads] = " + std::to_string(shape.q_heads) + " (LSH shares queries and keys)");
    }
    if (shape.q_len >= std::numeric_limits<std::int32_t>::max()) {
      detail::reject("q.sizes[seq]", shape.q_len, "LSH needs n < 2^31 - 1 (rows in sorted order are int32)");
    }
    if (!rotations.empty()) {
      const index_t per_head = shape.head_dim * rounds * bucket_layout(shape.q_len).columns;
      const index_t size = static_cast<index_t>(rotations.size());
      if (size != per_head && size != per_head * shape.q_heads) {
        detail::reject("Lsh.rotations.size()", size,
                       "must be P * D * R * columns = P * " + std::to_string(per_head) +
                           " with P = 1 or q.sizes[heads] = " + std::to_string(shape.q_heads));
      }
    }
  }

  /// Throws attnkit::invalid_argument unless k is the same view as q (the same data and
  /// strides; with validated sizes, the same sizes): LSH shares queries and keys.
  template <class T>
  static void require_shared_keys(const TensorView<const T>& q, const TensorView<const T>& k) {
    if (k.data() != q.data() || k.strides() != q.strides()) {
      detail::reject("k", "another view than q",
                     "must be the same view as q: LSH attention shares queries and keys (SPEC.md section 7)");
    }
  }

  template <class T, class... Elements>
  kernel::LshPlan<T> plan(const AttentionCall<T, Elements...>& call, const TileShape& tiles) const {
    validate(call.shape);
    require_shared_keys(call.q, call.k);
    const kernel::LshBucketLayout layout = bucket_layout(call.shape.q_len);
    return kernel::LshPlan<T>(geometry(call.shape.q_len), layout, rotation_source(call.shape.head_dim, layout), tiles);
  }

  /// Pairs: the slots each occurrence scores, R n (before + 1 + after) chunk per (batch, head)
  /// (padding and causally excluded slots included: the kernel scores them); under the
  /// n <= chunk rule the n^2 (causal n (n + 1) / 2) pairs of full attention. FLOP: those
  /// pairs' 2 (D + Dv), plus hashing's 2 n D R columns per (batch, head) as extra_flops.
  PatternCost cost(const AttentionShape& shape) const {
    validate(shape);
    const kernel::LshGeometry g = geometry(shape.q_len);
    const double n = static_cast<double>(shape.q_len);
    const double pairs = g.hashed ? static_cast<double>(g.rounds) * n * static_cast<double>(g.window_slots())
                                  : (causal ? n * (n + 1) / 2 : n * n);
    PatternCost cost = softmax_cost(pairs, shape);
    if (g.hashed) {
      cost.extra_flops = 2.0 * n * static_cast<double>(shape.head_dim * rounds * bucket_layout(shape.q_len).columns) *
                         static_cast<double>(shape.batch * shape.q_heads);
    }
    cost.flops += cost.extra_flops;
    return cost;
  }

  kernel::LshGeometry geometry(index_t n) const {
    return kernel::LshGeometry::of(n, chunk, rounds, before, after, causal, key_epsilon);
  }

 private:
  kernel::LshRotationSource rotation_source(index_t dim, const kernel::LshBucketLayout& layout) const {
    const index_t per_head = dim * rounds * layout.columns;
    return kernel::LshRotationSource{
        rotations.empty() ? nullptr : rotations.data(),
        rotations.empty() || per_head == 0 ? 1 : static_cast<index_t>(rotations.size()) / per_head, seed, layer};
  }
};

}  // namespace attnkit
