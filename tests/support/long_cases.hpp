#pragma once
// The lengths of the longest float64-reference cases, SPEC.md section 11's 4096 and 1000,
// shorter in a sanitized build (ASan, UBSan, TSan), where the kernels and the O(n^2)
// reference run 5-20x slower: four 4096 x 4096 cases took 97 s of the sanitize preset's test
// time, and the n = 1000 cases of the pattern sweeps most of the rest. The plain build runs
// the full lengths; the kernels' code paths at the shorter ones are the same (several key
// panels of 256 and query tiles of 32, partial last tiles, several panels per thread).

#include "attnkit/core/index.hpp"

namespace attnkit::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizedBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(undefined_behavior_sanitizer)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
#else
inline constexpr bool kSanitizedBuild = false;
#endif

/// n of the long reference cases: 4096, or 2048 under a sanitizer.
inline constexpr index_t kLongReferenceLength = kSanitizedBuild ? 2048 : 4096;

/// The longest n of the pattern sweeps: 1000, or 555 under a sanitizer (a third of the
/// reference's pairs; like 1000, no multiple of a tile or block size).
inline constexpr index_t kSweepLength = kSanitizedBuild ? 555 : 1000;

}  // namespace attnkit::testing
