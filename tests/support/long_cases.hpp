#pragma once
// The length of the longest float64-reference cases: SPEC.md section 11's 4096, halved in a
// sanitized build (ASan, UBSan, TSan), where the O(n^2) reference runs several times slower
// and four 4096 x 4096 cases took 97 s of the sanitize preset's test time. The kernels' code
// paths at 2048 are those at 4096 (many key and query tiles, several panels per thread).

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

}  // namespace attnkit::testing
