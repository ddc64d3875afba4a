#pragma once
// attnkit::SimdTarget: the instruction sets attnkit::dispatch carries kernels for, and which
// of them the running CPU can execute.

#include <array>
#include <optional>
#include <string_view>

#include "attnkit/simd/cpu_features.hpp"

namespace attnkit {

/// An instruction set of the x86-64 psABI levels; attnkit::dispatch compiles every kind once
/// for each (-march=x86-64, x86-64-v3, x86-64-v4).
enum class SimdTarget {
  kSse2,    ///< x86-64 baseline: 4 floats per vector, 16 registers
  kAvx2,    ///< x86-64-v3: AVX2 + FMA, 8 floats per vector, 16 registers
  kAvx512,  ///< x86-64-v4: AVX-512 F/BW/CD/DQ/VL, 16 floats per vector, 32 registers
};

/// Every target, lowest first.
inline constexpr std::array<SimdTarget, 3> kSimdTargets = {SimdTarget::kSse2, SimdTarget::kAvx2, SimdTarget::kAvx512};

/// "sse2", "avx2" or "avx512": the names the ATTNKIT_SIMD_TARGET environment variable takes.
constexpr std::string_view simd_target_name(SimdTarget target) {
  switch (target) {
    case SimdTarget::kSse2:
      return "sse2";
    case SimdTarget::kAvx2:
      return "avx2";
    case SimdTarget::kAvx512:
      return "avx512";
  }
  return "unknown";
}

/// The target named `name` (as simd_target_name gives it), or nothing.
constexpr std::optional<SimdTarget> parse_simd_target(std::string_view name) {
  for (SimdTarget target : kSimdTargets) {
    if (simd_target_name(target) == name) return target;
  }
  return std::nullopt;
}

/// Whether a CPU with these levels (and its OS) executes `target`'s code.
constexpr bool runs_on(SimdTarget target, const simd::CpuLevels& cpu) {
  switch (target) {
    case SimdTarget::kSse2:
      return true;
    case SimdTarget::kAvx2:
      return cpu.x86_64_v3;
    case SimdTarget::kAvx512:
      return cpu.x86_64_v4;
  }
  return false;
}

}  // namespace attnkit
