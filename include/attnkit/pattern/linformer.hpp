#pragma once
// attnkit::Linformer: low-rank attention by projection along the sequence (SPEC.md section 8,
// Wang et al., arXiv 2006.04768).

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/cost.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/rng.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/core/validate.hpp"
#include "attnkit/kernel/linformer_plan.hpp"
#include "attnkit/kernel/linformer_projection.hpp"
#include "attnkit/parallel/team.hpp"
#include "attnkit/pattern/full.hpp"

namespace attnkit {

/// o = softmax(sigma Q K'^T) V' with K' = E[:, :Lk] K and V' = F[:, :Lk] V per (batch, kv
/// head): every query attends kp projected keys, each a learned mix of all Lk positions.
///   e, f: row-major [P x kp x n_max] floats, P = 1 (shared by every kv head) or P = Hk (one
///         per kv head, checked per call); f may be e (a shared key-value projection, stored
///         once: pass equal vectors or use the three-argument constructor). Copies of the
///         pattern share the matrices.
///   Lk < n_max uses the first Lk columns; Lk > n_max is an error. Key padding
///   (Options::key_lengths) projects only each batch element's valid rows, which is the same
///   as zeroing the padded K/V rows first; NaN or Inf in padded rows is never read.
///   causal must stay false: a projected key mixes every position, so no causal order exists
///   (attention throws attnkit::invalid_argument when it is set).
/// Cost: projections 2 kp Lk (D + Dv) per (batch, kv head), attention 2 Lq kp (D + Dv) per
/// (batch, query head); nothing O(Lq Lk) is formed.
/// Usage: auto lin = attnkit::Linformer::gaussian(256, 16384, 1, seed);
///        attnkit::attention(lin, q, k, v, out);
class Linformer {
 public:
  /// Honours Options::key_lengths (KeyPaddedPattern).
  static constexpr bool kKeyPadding = true;

  bool causal = false;

  Linformer(index_t kp, index_t n_max, std::vector<float> e, std::vector<float> f)
      : kp_(kp), n_max_(n_max), e_(std::make_shared<const std::vector<float>>(std::move(e))) {
    f_ = f == *e_ ? e_ : std::make_shared<const std::vector<float>>(std::move(f));
    check_parameters();
  }
  /// A shared key-value projection: F = E, stored once.
  Linformer(index_t kp, index_t n_max, std::vector<float> e)
      : kp_(kp), n_max_(n_max), e_(std::make_shared<const std::vector<float>>(std::move(e))), f_(e_) {
    check_parameters();
  }

  /// `heads` matrices [kp x n_max] of N(0, 1/kp) entries (the random projection of the
  /// paper's Theorem 1), from the counter-based generator keyed by (seed, stream, head,
  /// entry): the same values for any thread count or call order.
  static std::vector<float> gaussian_projection(index_t kp, index_t n_max, index_t heads, std::uint64_t seed,
                                                std::uint64_t stream = 0) {
    const double sd = 1.0 / std::sqrt(static_cast<double>(std::max<index_t>(kp, 1)));
    return generate(kp, n_max, heads, [&](index_t h, index_t entry) {
      return sd * normal_from_counter(seed, stream, static_cast<std::uint64_t>(h), static_cast<std::uint64_t>(entry));
    });
  }
  /// `heads` matrices [kp x n_max] initialised as fairseq's Linformer initialises its
  /// projections (examples/linformer, multihead_linear_attention.py: compress_k and
  /// compress_v are nn.Linear(max_seq_len, kp) weights given nn.init.xavier_uniform_ with gain
  /// 1/sqrt(2)): uniform on [-a, a], a = gain sqrt(6 / (n_max + kp)) = sqrt(3 / (n_max + kp)).
  /// (fairseq projects the layer input before its K/V projections; without biases the two
  /// orders give the same K' and V'.)
  static std::vector<float> xavier_uniform_projection(index_t kp, index_t n_max, index_t heads, std::uint64_t seed,
                                                      std::uint64_t stream = 0) {
    const double a = std::sqrt(3.0 / static_cast<double>(std::max<index_t>(kp + n_max, 1)));
    return generate(kp, n_max, heads, [&](index_t h, index_t entry) {
      const std::uint64_t bits =
          counter_random(seed, stream, static_cast<std::uint64_t>(h), static_cast<std::uint64_t>(entry), 0);
      return a * (2.0 * unit_interval(bits) - 1.0);
    });
  }
  /// E and F drawn independently (streams 0 and 1) by gaussian_projection.
  static Linformer gaussian(index_t kp, index_t n_max, index_t heads, std::uint64_t seed) {
    return Linformer(kp, n_max, gaussian_projection(kp, n_max, heads, seed, 0),
                     gaussian_projection(kp, n_max, heads, seed, 1));
  }
  /// E and F drawn independently (streams 0 and 1) by xavier_uniform_projection.
  static Linformer xavier_uniform(index_t kp, index_t n_max, index_t heads, std::uint64_t seed) {
    return Linformer(kp, n_max, xavier_uniform_projection(kp, n_max, heads, seed, 0),
                     xavier_uniform_projection(kp, n_max, heads, seed, 1));
  }

  index_t kp() const { return kp_; }
  index_t n_max() const { return n_max_; }
  /// P of E and of F: 1 (shared by all kv heads) or Hk.
  index_t key_projection_heads() const { return static_cast<index_t>(e_->size()) / (kp_ * n_max_); }
  index_t value_projection_heads() const { return static_cast<index_t>(f_->size()) / (kp_ * n_max_); }
  /// True when F is E (one stored matrix).
  bool shares_key_value_projection() const { return e_ == f_; }
  /// E and F of kv head h, row-major [kp x n_max].
  const float* key_projection(index_t h) const { return matrices(*e_).of(h, kp_, n_max_); }
  const float* value_projection(index_t h) const { return matrices(*f_).of(h, kp_, n_max_); }

  /// Throws attnkit::invalid_argument unless the pattern can run on `shape`: not causal,
  /// Lk <= n_max, and P = 1 or Hk for E and for F.
  void validate(const AttentionShape& shape) const {
    if (causal) {
      detail::reject("Linformer.causal", "true",
                     "Linformer cannot be causal: each projected key mixes all Lk positions (SPEC.md section 8)");
    }
    if (shape.kv_len > n_max_) {
      detail::reject("k.sizes[seq]", shape.kv_len,
                     "Linformer needs Lk <= n_max = " + std::to_string(n_max_) + " (the projections' columns)");
    }
    for (const auto& [name, heads] :
         {std::pair{"Linformer e", key_projection_heads()}, std::pair{"Linformer f", value_projection_heads()}}) {
      if (heads != 1 && heads != shape.kv_heads) {
        detail::reject(
            std::string(name) + " matrices (P)", heads,
            "must be 1 (shared) or k.sizes[heads] = " + std::to_string(shape.kv_heads) + " (one per kv head)");
      }
    }
  }

  /// Projection, then full attention over the kp projected keys (Full's plan).
  template <class T, class... Elements>
  kernel::LinformerPlan<T, Full::Plan> plan(const AttentionCall<T, Elements...>& call, const TileShape& tiles) const {
    validate(call.shape);
    AttentionShape projected = call.shape;
    projected.kv_len = kp_;
    return kernel::LinformerPlan<T, Full::Plan>(kp_, n_max_, matrices(*e_), matrices(*f_), tiles,
                                                Full{}.plan(projected, tiles));
  }

  /// Pairs: Lq kp per (batch, query head); FLOP: those pairs' 2 (D + Dv) each, plus the
  /// projections' 2 kp Lk (D + Dv) per (batch, kv head) as extra_flops.
  PatternCost cost(const AttentionShape& shape) const {
    validate(shape);
    PatternCost cost = softmax_cost(static_cast<double>(shape.q_len) * static_cast<double>(kp_), shape);
    cost.extra_flops = 2.0 * static_cast<double>(kp_) * static_cast<double>(shape.kv_len) *
                       static_cast<double>(shape.head_dim + shape.value_dim) * static_cast<double>(shape.batch) *
                       static_cast<double>(shape.kv_heads);
    cost.flops += cost.extra_flops;
    return cost;
  }

  /// The projected keys and values themselves: keys_out [B, Hk, kp, D] = E K and
  /// values_out [B, Hk, kp, Dv] = F V (with options.key_lengths and options.threads as in
  /// attention). For inspection and for timing the projection apart.
  template <KernelScalar T>
  void project(std::type_identity_t<TensorView<const T>> k, std::type_identity_t<TensorView<const T>> v,
               TensorView<T> keys_out, TensorView<T> values_out, const Options& options = {}) const {
    detail::validate_view("k", k, 1);
    detail::validate_view("v", v, 1);
    detail::validate_view("keys_out", keys_out, 1);
    detail::validate_view("values_out", values_out, 1);
    const AttentionShape shape{k.batch(), k.heads(), k.heads(), 0, k.seq(), k.dim(), v.dim()};
    for (int axis = 0; axis < 3; ++axis) {
      if (v.size(axis) != k.size(axis))
        detail::reject(std::string("v.sizes[") + axis_name(axis) + "]", v.size(axis), "must equal k's");
    }
    const std::array<index_t, 4> key_sizes{k.batch(), k.heads(), kp_, k.dim()},
        value_sizes{k.batch(), k.heads(), kp_, v.dim()};
    for (int axis = 0; axis < 4; ++axis) {
      if (keys_out.size(axis) != key_sizes[axis]) {
        detail::reject(std::string("keys_out.sizes[") + axis_name(axis) + "]", keys_out.size(axis),
                       "must be " + std::to_string(key_sizes[axis]) + " ([B, Hk, kp, D] of k)");
      }
      if (values_out.size(axis) != value_sizes[axis]) {
        detail::reject(std::string("values_out.sizes[") + axis_name(axis) + "]", values_out.size(axis),
                       "must be " + std::to_string(value_sizes[axis]) + " ([B, Hk, kp, Dv] of v)");
      }
    }
    if (options.threads < 0) detail::reject("options.threads", options.threads, "must be >= 0 (0 = OpenMP default)");
    detail::validate_key_lengths(true, options, shape);
    validate(shape);
    const kernel::SequenceProjection<T> projection(kp_, n_max_, matrices(*e_), matrices(*f_), k, v, keys_out,
                                                   values_out, options.key_lengths);
    const double flops = cost(shape).extra_flops;
    parallel::parallel_region(parallel::resolve_threads(options.threads, flops), [&](parallel::Team& team) {
      team.for_each_dynamic(projection.items(), [&](index_t item) { projection.run_item(item); });
    });
  }

 private:
  void check_parameters() const {
    if (kp_ < 1) detail::reject("Linformer kp", kp_, "must be >= 1 (projected keys)");
    if (n_max_ < 1)
      detail::reject("Linformer n_max", n_max_, "must be >= 1 (the longest sequence the projections cover)");
    index_t per_head = 0;
    if (__builtin_mul_overflow(kp_, n_max_, &per_head)) detail::reject("Linformer kp * n_max", kp_, "overflows int64");
    for (const auto& [name, values] :
         {std::pair{"Linformer e.size()", e_.get()}, std::pair{"Linformer f.size()", f_.get()}}) {
      const index_t size = static_cast<index_t>(values->size());
      if (size == 0 || size % per_head != 0) {
        detail::reject(name, size,
                       "must be P * kp * n_max with P >= 1 (kp * n_max = " + std::to_string(per_head) + ")");
      }
    }
  }

  kernel::ProjectionMatrices matrices(const std::vector<float>& m) const {
    return kernel::ProjectionMatrices{m.data(), static_cast<index_t>(m.size()) / (kp_ * n_max_)};
  }

  template <class Entry>
  static std::vector<float> generate(index_t kp, index_t n_max, index_t heads, Entry&& entry) {
    if (kp < 1 || n_max < 1 || heads < 1) {
      detail::reject("Linformer projection sizes (kp, n_max, heads)",
                     std::to_string(kp) + ", " + std::to_string(n_max) + ", " + std::to_string(heads),
                     "must all be >= 1");
    }
    std::vector<float> m(static_cast<std::size_t>(heads * kp * n_max));
    for (index_t h = 0; h < heads; ++h)
      for (index_t entry_index = 0; entry_index < kp * n_max; ++entry_index)
        m[static_cast<std::size_t>(h * kp * n_max + entry_index)] = static_cast<float>(entry(h, entry_index));
    return m;
  }

  index_t kp_;
  index_t n_max_;
  std::shared_ptr<const std::vector<float>> e_;
  std::shared_ptr<const std::vector<float>> f_;
};

}  // namespace attnkit
