// attnkit::dispatch's choice of target: CPUID and XCR0 (simd/cpu_features.hpp), the
// ATTNKIT_SIMD_TARGET override and set_simd_target. Compiled for the baseline only.

#include <atomic>
#include <cstdlib>
#include <string>

#include "attnkit/core/errors.hpp"
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

std::string runnable_list() {
  std::string names;
  for (SimdTarget target : supported_simd_targets()) names += (names.empty() ? "" : ", ") + std::string(simd_target_name(target));
  return names;
}

SimdTarget initial_target() {
  const char* forced = std::getenv("ATTNKIT_SIMD_TARGET");
  if (forced != nullptr && *forced != '\0') {
    const std::optional<SimdTarget> target = parse_simd_target(forced);
    if (!target) attnkit::detail::reject("ATTNKIT_SIMD_TARGET", forced, "must be sse2, avx2 or avx512");
    if (!runs_on(*target, cpu_levels())) {
      attnkit::detail::reject("ATTNKIT_SIMD_TARGET", forced, "this CPU (or its OS) does not run it; it runs " + runnable_list());
    }
    return *target;
  }
  return supported_simd_targets().back();
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

std::vector<SimdTarget> supported_simd_targets() {
  std::vector<SimdTarget> targets;
  for (SimdTarget target : kSimdTargets) {
    if (runs_on(target, cpu_levels())) targets.push_back(target);
  }
  return targets;
}

void set_simd_target(SimdTarget target) {
  if (!runs_on(target, cpu_levels())) {
    attnkit::detail::reject("simd target", simd_target_name(target), "this CPU (or its OS) does not run it; it runs " + runnable_list());
  }
  chosen_target.store(static_cast<int>(target), std::memory_order_relaxed);
}

const KernelTable& kernel_table() { return table_of(simd_target()); }

}  // namespace attnkit::dispatch
