#pragma once
// PatternCost: the work a pattern implies for a shape (SPEC.md cost formulas).

#include "attnkit/core/shape.hpp"

namespace attnkit {

/// Attended (query, key) pairs summed over batch and query heads, and the FLOP count used for
/// GFLOP/s: 2 * pairs * (head_dim + value_dim) for softmax kernels (QK^T and PV; exp not
/// counted), plus extra_flops for work beyond the softmax over attended pairs (Linformer's
/// projections, LSH's hashing, FFTs), which `flops` includes. Doubles, because pairs reach
/// 2^40 and beyond for long multi-head calls. density is attended_pairs over all
/// B Hq Lq Lk (query, key) pairs (0 for an empty call).
struct PatternCost {
  double attended_pairs = 0;
  double flops = 0;
  double density = 0;
  double extra_flops = 0;

  /// The softmax part of flops.
  double attention_flops() const { return flops - extra_flops; }
};

/// Cost of a softmax kernel attending `pairs_per_head` (query, key) pairs in every
/// (batch, query head): 2 * pairs * (D + Dv) FLOP (SPEC.md section 1; PERF.md).
inline PatternCost softmax_cost(double pairs_per_head, const AttentionShape& shape) {
  const double pairs = pairs_per_head * static_cast<double>(shape.batch) * static_cast<double>(shape.q_heads);
  const double all_pairs = static_cast<double>(shape.batch) * static_cast<double>(shape.q_heads) *
                           static_cast<double>(shape.q_len) * static_cast<double>(shape.kv_len);
  return PatternCost{pairs, 2.0 * pairs * static_cast<double>(shape.head_dim + shape.value_dim),
                     all_pairs > 0 ? pairs / all_pairs : 0.0};
}

/// The same, from `pairs` summed over every query head of one batch element (patterns whose
/// heads attend differently): their per-head average times B Hq.
inline PatternCost softmax_cost_over_heads(double pairs, const AttentionShape& shape) {
  return softmax_cost(shape.q_heads > 0 ? pairs / static_cast<double>(shape.q_heads) : 0.0, shape);
}

}  // namespace attnkit
