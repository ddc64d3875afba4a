#pragma once
// One pattern of every kind attnkit::dispatch compiles (a Schedule layer each), for the
// dispatch tests: small enough for the float64 reference, large enough for several tiles.

#include <vector>

#include "attnkit/attnkit.hpp"

namespace attnkit::testing {

/// Sequence length of dispatch_kinds' calls (Lq = Lk, Hq = Hk: q also serves as k, as Lsh needs).
inline constexpr index_t kDispatchLength = 200;

inline std::vector<Schedule::Layer> dispatch_kinds() {
  Lsh lsh;
  lsh.chunk = 16;
  lsh.rounds = 2;
  lsh.seed = 5;
  return {Full{},
          Full{.causal = true},
          SlidingWindow::symmetric(24),
          Dilated::symmetric(12, {1, 2, 3, 4}),
          Global({0, 17, 100}),
          BlockSparse::local(32, 7, true),
          BigBird(16, 2, 3),
          Linformer::gaussian(64, kDispatchLength, 1, 7),
          lsh,
          KernelizedRpe{.features = 16, .seed = 3, .algorithm = RpeAlgorithm::kDirect}};
}

}  // namespace attnkit::testing
