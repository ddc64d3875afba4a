#pragma once
// attnkit::q8_0_block: 32 int8 values with one float16 scale, the 8-bit KV-cache format
// (docs/SPEC.md section 13; the block layout and rounding llama.cpp's ggml calls Q8_0, so a
// cache written by either can be read by the other).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"

namespace attnkit {

/// 32 values x_i = to_float(scale) * values[i]: 34 bytes, 2-byte aligned, no padding
/// (llama.cpp's block_q8_0: ggml_fp16_t d, int8_t qs[32]).
struct q8_0_block {
  static constexpr index_t kValues = 32;
  float16 scale;
  std::int8_t values[kValues];
};
static_assert(sizeof(q8_0_block) == 34 && alignof(q8_0_block) == 2 && std::is_trivially_copyable_v<q8_0_block> &&
              std::is_standard_layout_v<q8_0_block>);

/// Quantizes x[0 .. 32): amax = max |x_i|, d = amax / 127, values q_i = round(x_i / d) (half
/// away from zero, as roundf; computed as x_i * (1 / d) like ggml) or 0 when 1 / d is not finite
/// (d = 0, or amax below about 3.7e-37, where 1 / d overflows float; the scale, d rounded to
/// float16, is then 0 too, so the block reads back as zeros, as ggml's block would); the scale
/// is d rounded to float16. A NaN or infinity in x gives a NaN scale and zero values, so the
/// whole block reads back as NaN rather than as silently wrong finite values (ggml's
/// arithmetic would convert a NaN, or x * inf, to int8 there, which C++ leaves undefined).
inline q8_0_block quantize_q8_0(const float* x) {
  float amax = 0.0f;
  bool finite = true;
  for (index_t i = 0; i < q8_0_block::kValues; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    finite = finite && std::isfinite(x[i]);
  }
  const float d = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
  const float inverse = finite && d != 0.0f ? 1.0f / d : 0.0f;
  const bool representable = std::isfinite(inverse);  // false when d is too small to invert
  q8_0_block block;
  block.scale = to_float16(d);
  for (index_t i = 0; i < q8_0_block::kValues; ++i) {
    block.values[i] = finite && representable ? static_cast<std::int8_t>(std::round(x[i] * inverse)) : std::int8_t{0};
  }
  return block;
}

/// x[0 .. 32) = the block's values: to_float(scale) * values[i], exact in float.
inline void dequantize_q8_0(const q8_0_block& block, float* x) {
  const float d = to_float(block.scale);
  for (index_t i = 0; i < q8_0_block::kValues; ++i) x[i] = d * static_cast<float>(block.values[i]);
}

}  // namespace attnkit
