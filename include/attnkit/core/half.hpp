#pragma once
// The half-precision storage types, bfloat16 and float16 (docs/SPEC.md "Element types"), and
// their exact conversions to and from float. Storage only: kernels widen half values to float
// and compute in float.

#include <bit>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <type_traits>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace attnkit {

/// bfloat16: the upper 16 bits of an IEEE binary32 (sign, 8 exponent bits, 7 fraction bits).
/// Layout-compatible with PyTorch's at::BFloat16 and Eigen::bfloat16, so their buffers are
/// viewed as TensorView<const bfloat16> without a copy. `bits` is the whole value; there is no
/// arithmetic and no comparison (compare to_float(a) and to_float(b), or the bits).
struct bfloat16 {
  std::uint16_t bits = 0;
};

/// float16: IEEE binary16 (sign, 5 exponent bits, 10 fraction bits; max finite 65504),
/// layout-compatible with at::Half, Eigen::half, _Float16 and ggml_fp16_t.
struct float16 {
  std::uint16_t bits = 0;
};

static_assert(sizeof(bfloat16) == 2 && alignof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16> &&
              std::is_standard_layout_v<bfloat16>);
static_assert(sizeof(float16) == 2 && alignof(float16) == 2 && std::is_trivially_copyable_v<float16> &&
              std::is_standard_layout_v<float16>);

/// A half-precision element type of attnkit.
template <class T>
concept HalfType = std::same_as<T, bfloat16> || std::same_as<T, float16>;

namespace detail {

/// IEEE-style bit-level conversions, portable and constexpr; the public functions below use
/// these where the target has no conversion instruction, with bit-identical results.

/// Widening a binary16 is exact: normal values rebias the exponent (15 -> 127), subnormals
/// m * 2^-24 are normalised, a NaN keeps its sign and payload and becomes quiet (as F16C's
/// vcvtph2ps does).
constexpr float float16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  const std::uint32_t fraction = h & 0x3FFu;
  if (exponent == 0x1F) {  // infinity, or NaN with the quiet bit set
    return std::bit_cast<float>(sign | 0x7F800000u | (fraction << 13) | (fraction != 0 ? 0x00400000u : 0u));
  }
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (fraction << 13));
  if (fraction == 0) return std::bit_cast<float>(sign);
  // Subnormal: shift the leading one into the implicit bit, lowering the exponent as we go.
  std::uint32_t shifted = fraction;
  std::uint32_t float_exponent = 113;  // 2^-14, the exponent of the smallest normal
  while ((shifted & 0x400u) == 0) {
    shifted <<= 1;
    --float_exponent;
  }
  return std::bit_cast<float>(sign | (float_exponent << 23) | ((shifted & 0x3FFu) << 13));
}

/// Rounds to nearest, ties to even: magnitudes from 65520 (halfway past 65504) become inf,
/// those below 2^-14 become subnormals (halfway to zero, 2^-25, rounds to zero), a NaN keeps
/// its sign and the top of its payload and is quiet (as F16C's vcvtps2ph does).
constexpr std::uint16_t float_to_float16(float x) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = (f >> 16) & 0x8000u;
  const std::uint32_t magnitude = f & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  if (magnitude >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520, and inf
  if (magnitude >= 0x38800000u) {  // normal: rebias (127 -> 15), round 23 fraction bits to 10
    std::uint32_t rebiased = magnitude - 0x38000000u;
    rebiased += 0xFFFu + ((rebiased >> 13) & 1u);  // a carry into the exponent is the right result
    return static_cast<std::uint16_t>(sign | (rebiased >> 13));
  }
  if (magnitude <= 0x33000000u) return static_cast<std::uint16_t>(sign);  // <= 2^-25: zero
  // Subnormal result in units of 2^-24: the significand shifted right by 126 - exponent
  // (14 to 24 places), rounded to nearest even; rounding up to 0x400 gives the smallest normal.
  const std::uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126 - (magnitude >> 23);
  std::uint32_t units = significand >> shift;
  const std::uint32_t remainder = significand & ((1u << shift) - 1);
  const std::uint32_t halfway = 1u << (shift - 1);
  if (remainder > halfway || (remainder == halfway && (units & 1u) != 0)) ++units;
  return static_cast<std::uint16_t>(sign | units);
}

/// Rounds to nearest, ties to even (float subnormals are rounded, not flushed); values from
/// halfway past the largest finite bfloat16 become inf; a NaN keeps its sign and the top of
/// its payload and is quiet.
constexpr std::uint16_t float_to_bfloat16(float x) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(x);
  if ((f & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((f >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((f + 0x7FFFu + ((f >> 16) & 1u)) >> 16);
}

}  // namespace detail

/// Exact.
constexpr float to_float(bfloat16 x) { return std::bit_cast<float>(static_cast<std::uint32_t>(x.bits) << 16); }

/// Exact (F16C's vcvtph2ps where the target has it).
constexpr float to_float(float16 x) {
#if defined(__F16C__)
  if (!std::is_constant_evaluated()) return _cvtsh_ss(x.bits);
#endif
  return detail::float16_to_float(x.bits);
}

/// Round to nearest even (see detail::float_to_bfloat16).
constexpr bfloat16 to_bfloat16(float x) { return bfloat16{detail::float_to_bfloat16(x)}; }

/// Round to nearest even, overflow to +-inf, subnormals kept (F16C's vcvtps2ph where the
/// target has it).
constexpr float16 to_float16(float x) {
#if defined(__F16C__)
  if (!std::is_constant_evaluated())
    return float16{static_cast<std::uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT))};
#endif
  return float16{detail::float_to_float16(x)};
}

/// to_bfloat16 or to_float16 by the target type (generic code that narrows to T).
template <HalfType T>
constexpr T narrow(float x) {
  if constexpr (std::same_as<T, bfloat16>) {
    return to_bfloat16(x);
  } else {
    return to_float16(x);
  }
}

/// x as float when it is a half type, else x unchanged (generic code reading any element type).
template <class T>
constexpr auto widen(T x) {
  if constexpr (HalfType<T>) {
    return to_float(x);
  } else {
    return x;
  }
}

namespace detail {
/// x rounded to a float by round-to-odd: the float nearest x toward zero, with its last bit
/// set when that is inexact. A float keeps 24 significant bits, more than twice a half type's
/// 11 plus 2, so rounding this float to nearest even gives x correctly rounded to the half
/// type (no double rounding).
inline float round_to_odd_float(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) == x || x != x) return f;
  if (std::abs(static_cast<double>(f)) > std::abs(x)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) | 1u);
}
}  // namespace detail

/// x stored as an element of type E: rounded to nearest even for a half type (from double
/// without double rounding), else converted.
template <class E, class T>
E store_as(T x) {
  if constexpr (HalfType<E> && std::same_as<T, double>) {
    return narrow<E>(detail::round_to_odd_float(x));
  } else if constexpr (HalfType<E>) {
    return narrow<E>(static_cast<float>(x));
  } else {
    return static_cast<E>(widen(x));
  }
}

}  // namespace attnkit
