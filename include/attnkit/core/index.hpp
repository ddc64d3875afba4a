#pragma once
// The signed index type used for every size, stride and position.

#include <cstdint>

namespace attnkit {

/// Signed 64-bit: sizes, strides and element offsets. Signed so that strides may be negative
/// and differences of positions (causal offsets, window bounds) need no casts.
using index_t = std::int64_t;

/// Which of `tables` per-head tables (dilations, layouts, projections, biases) query or kv
/// head `head` reads: its own, or the one shared table when tables == 1.
constexpr index_t table_of_head(index_t tables, index_t head) { return tables == 1 ? 0 : head; }

namespace detail {

/// ceil(value / step) for value >= 0, step > 0; exact up to INT64_MAX (no value + step - 1).
constexpr index_t ceil_div(index_t value, index_t step) { return value / step + (value % step != 0 ? 1 : 0); }

/// Smallest multiple of `step` that is >= value (value >= 0, step > 0).
constexpr index_t round_up(index_t value, index_t step) { return ceil_div(value, step) * step; }

}  // namespace detail
}  // namespace attnkit
