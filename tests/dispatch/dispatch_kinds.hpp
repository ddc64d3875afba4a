#pragma once
// One pattern of every registered kind (pattern/kinds.hpp), which attnkit::dispatch compiles,
// for the dispatch tests: small enough for the float64 reference, large enough for several
// tiles. A registered kind without an example() here does not compile.

#include <type_traits>
#include <vector>

#include "attnkit/pattern/kinds.hpp"

namespace attnkit::testing {

/// Sequence length of dispatch_kinds' calls (Lq = Lk, Hq = Hk: q also serves as k, as Lsh needs).
inline constexpr index_t kDispatchLength = 200;

inline std::vector<Full> examples(std::type_identity<Full>) { return {Full{}, Full{.causal = true}}; }
inline std::vector<SlidingWindow> examples(std::type_identity<SlidingWindow>) { return {SlidingWindow::symmetric(24)}; }
inline std::vector<Dilated> examples(std::type_identity<Dilated>) { return {Dilated::symmetric(12, {1, 2, 3, 4})}; }
inline std::vector<Global> examples(std::type_identity<Global>) { return {Global({0, 17, 100})}; }
inline std::vector<BlockSparse> examples(std::type_identity<BlockSparse>) { return {BlockSparse::local(32, 7, true)}; }
inline std::vector<BigBird> examples(std::type_identity<BigBird>) { return {BigBird(16, 2, 3)}; }
inline std::vector<Linformer> examples(std::type_identity<Linformer>) {
  return {Linformer::gaussian(64, kDispatchLength, 1, 7)};
}
inline std::vector<Lsh> examples(std::type_identity<Lsh>) {
  Lsh lsh;
  lsh.chunk = 16;
  lsh.rounds = 2;
  lsh.seed = 5;
  return {lsh};
}
inline std::vector<KernelizedRpe> examples(std::type_identity<KernelizedRpe>) {
  return {KernelizedRpe{.features = 16, .seed = 3, .algorithm = RpeAlgorithm::kDirect}};
}

/// The examples of every registered kind, in registry order.
inline std::vector<AnyKind> dispatch_kinds() {
  std::vector<AnyKind> all;
  Kinds::for_each([&]<class P>(std::type_identity<P> kind, std::size_t) {
    for (const P& pattern : examples(kind)) all.push_back(pattern);
  });
  return all;
}

}  // namespace attnkit::testing
