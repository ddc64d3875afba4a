#pragma once
// The signed index type used for every size, stride and position.

#include <cstdint>

namespace attnkit {

/// Signed 64-bit: sizes, strides and element offsets. Signed so that strides may be negative
/// and differences of positions (causal offsets, window bounds) need no casts.
using index_t = std::int64_t;

}  // namespace attnkit
