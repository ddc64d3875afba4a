// attnkit::ascii_view: literal pictures of small masks.

#include <gtest/gtest.h>

#include <string>

#include "attnkit/core/errors.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/ascii_view.hpp"
#include "attnkit/pattern/block_sparse.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/sliding_window.hpp"
#include "support/plan_checks.hpp"

namespace attnkit::testing {
namespace {

TEST(AsciiView, CausalFullAttention) {
  EXPECT_EQ(ascii_view(Full{.causal = true}, AttentionShape{1, 1, 1, 3, 4, 1, 1}),
            "##..\n"
            "###.\n"
            "####\n");
}

TEST(AsciiView, WindowDownsampledIntoCells) {
  // n = 8 in cells of 2: radius 1 band; diagonal cells full, their neighbours touched.
  EXPECT_EQ(ascii_view(SlidingWindow::symmetric(1), AttentionShape{1, 1, 1, 8, 8, 1, 1}, 0, 4),
            "#+..\n"
            "+#+.\n"
            ".+#+\n"
            "..+#\n");
}

TEST(AsciiView, PicksTheHead) {
  const BlockSparse shifts = BlockSparse::cyclic_shifts(1, 3, {0, 1});
  EXPECT_EQ(ascii_view(shifts, AttentionShape{1, 2, 1, 3, 3, 1, 1}, 1), ".#.\n..#\n#..\n");
  expect_invalid_argument(
      [&] {
        (void)ascii_view(shifts, AttentionShape{1, 2, 1, 3, 3, 1, 1}, 2);
      },
      "ascii_view: head = 2");
}

}  // namespace
}  // namespace attnkit::testing
