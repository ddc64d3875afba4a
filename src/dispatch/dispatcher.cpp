// attnkit::dispatch's choice of target: CPUID and XCR0 (simd/cpu_features.hpp), the
// ATTNKIT_SIMD_TARGET override and set_simd_target. Compiled for the baseline only.

#include <atomic>
#include <cstdlib>
#include <optional>

#include "attnkit/dispatch.hpp"

namespace attnkit::dispatch {
namespace {

const KernelTable& table_of(SimdTarget target) {
  switch (target) {
    case SimdTarget::kAvx512:
      return *attnkit_dispatch_table_avx512();
    case SimdTarget::kAvx2:
      return *attnkit_dispatch_table_avx2();
    case SimdTarget::kSse2:
      break;
  }
  return *attnkit_dispatch_table_sse2();
}

const simd::CpuLevels& cpu_levels() {
  static const simd::CpuLevels levels = simd::detect_cpu_levels();
  return levels;
}

SimdTarget initial_target() {
  const std::optional<SimdTarget> forced = forced_simd_target(std::getenv("ATTNKIT_SIMD_TARGET"), cpu_levels());
  return forced ? *forced : targets_run_by(cpu_levels()).back();
}

// The target before any set_simd_target: initialised on first use (a throwing initialisation
// is retried by the next call, so a bad ATTNKIT_SIMD_TARGET fails every call the same way).
SimdTarget default_target() {
  static const SimdTarget target = initial_target();
  return target;
}

constexpr int kNoTargetSet = -1;
// set_simd_target's choice, or kNoTargetSet.
std::atomic<int> chosen_target{kNoTargetSet};

}  // namespace

SimdTarget simd_target() {
  const int chosen = chosen_target.load(std::memory_order_relaxed);
  return chosen == kNoTargetSet ? default_target() : static_cast<SimdTarget>(chosen);
}

std::vector<SimdTarget> supported_simd_targets() { return targets_run_by(cpu_levels()); }

void set_simd_target(SimdTarget target) {
  chosen_target.store(static_cast<int>(require_runs_on(target, cpu_levels(), "simd target")),
                      std::memory_order_relaxed);
}

const KernelTable& kernel_table() { return table_of(simd_target()); }

}  // namespace attnkit::dispatch
