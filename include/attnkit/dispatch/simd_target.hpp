#pragma once
// attnkit::SimdTarget: the instruction sets attnkit::dispatch carries kernels for, and which
// of them the running CPU can execute.

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnkit/core/errors.hpp"
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

/// The targets a CPU with these levels runs, lowest first (sse2 always).
inline std::vector<SimdTarget> targets_run_by(const simd::CpuLevels& cpu) {
  std::vector<SimdTarget> targets;
  for (SimdTarget target : kSimdTargets) {
    if (runs_on(target, cpu)) targets.push_back(target);
  }
  return targets;
}

namespace detail {

/// Throws attnkit::invalid_argument "attnkit: <argument> = <value>: this CPU (or its OS) does
/// not run it; it runs sse2, avx2" for a CPU with these levels.
[[noreturn]] inline void reject_unrunnable(std::string_view argument, std::string_view value,
                                           const simd::CpuLevels& cpu) {
  std::string runnable;
  for (SimdTarget target : targets_run_by(cpu))
    runnable += (runnable.empty() ? "" : ", ") + std::string(simd_target_name(target));
  reject(argument, value, "this CPU (or its OS) does not run it; it runs " + runnable);
}

}  // namespace detail

/// `target` when a CPU with these levels runs it, else attnkit::invalid_argument naming
/// `argument` and the target (attnkit::dispatch::set_simd_target's check).
inline SimdTarget require_runs_on(SimdTarget target, const simd::CpuLevels& cpu, std::string_view argument) {
  if (!runs_on(target, cpu)) detail::reject_unrunnable(argument, simd_target_name(target), cpu);
  return target;
}

/// The target an ATTNKIT_SIMD_TARGET value asks for on a CPU with these levels: nothing when
/// the variable is unset (nullptr) or empty; attnkit::invalid_argument naming the variable and
/// its value when it names no target or one the CPU does not run.
inline std::optional<SimdTarget> forced_simd_target(const char* value, const simd::CpuLevels& cpu) {
  if (value == nullptr || *value == '\0') return std::nullopt;
  const std::optional<SimdTarget> target = parse_simd_target(value);
  if (!target) detail::reject("ATTNKIT_SIMD_TARGET", value, "must be sse2, avx2 or avx512");
  if (!runs_on(*target, cpu)) detail::reject_unrunnable("ATTNKIT_SIMD_TARGET", value, cpu);
  return target;
}

}  // namespace attnkit
