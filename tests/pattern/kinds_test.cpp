// The registry of kinds (pattern/kinds.hpp): its order and names, and what derives from it
// (Schedule's layer, the dispatch concept's kinds, for_each's visiting order).

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "attnkit/pattern/kinds.hpp"
#include "attnkit/pattern/schedule.hpp"

namespace attnkit::testing {
namespace {

static_assert(std::is_same_v<Schedule::Layer, AnyKind>, "a Schedule layer holds any registered kind");
static_assert(std::is_same_v<Schedule, BasicSchedule<Full, SlidingWindow, Dilated, Global, BlockSparse, BigBird,
                                                     Linformer, Lsh, KernelizedRpe>>);
static_assert(kind_name<Full> == "Full" && kind_name<KernelizedRpe> == "KernelizedRpe");
static_assert(Kinds::size == std::variant_size_v<AnyKind>);

TEST(Kinds, NamesFollowTheRegistryOrder) {
  const std::vector<std::string_view> names(Kinds::names.begin(), Kinds::names.end());
  EXPECT_EQ(names, (std::vector<std::string_view>{"Full", "SlidingWindow", "Dilated", "Global", "BlockSparse",
                                                  "BigBird", "Linformer", "Lsh", "KernelizedRpe"}));
}

TEST(Kinds, ForEachVisitsEveryKindOnceInOrder) {
  std::vector<std::string> visited;
  Kinds::for_each([&]<class P>(std::type_identity<P>, std::size_t index) {
    static_assert(std::is_constructible_v<AnyKind, P>);
    EXPECT_EQ(Kinds::names[index], kind_name<P>);
    visited.emplace_back(kind_name<P>);
  });
  ASSERT_EQ(visited.size(), Kinds::size);
  for (std::size_t i = 0; i < visited.size(); ++i) EXPECT_EQ(visited[i], Kinds::names[i]);
}

}  // namespace
}  // namespace attnkit::testing
