// The driver's score-bias policy (core/concepts.hpp BiasedPlan, bias_scope): a plan written
// here adds a position bias b_ij = -slope |i - j| (ALiBi's form) to full attention. With
// BiasScope::kEveryTile the bias reaches every key tile, none of which needs a mask, and the
// result matches softmax(sigma <q_i, k_j> + b_ij) written from SPEC.md section 0 in double;
// with the default scope (tiles that need a mask, LSH's) it reaches none of them here.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/kernel/tiled_driver.hpp"
#include "attnkit/pattern/full.hpp"
#include "support/driver_call.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

constexpr double kSlope = 0.25;

/// Full attention's tiles (none masked) plus the bias -kSlope |i - j|, on the tiles `Scope`
/// names.
template <BiasScope Scope>
struct PositionBiasPlan : Full::Plan {
  static constexpr BiasScope kBiasScope = Scope;
  using Full::Plan::Plan;
  template <class S>
  void add_bias(index_t /*head*/, index_t position, const KeyTile& tile, S* scores, S unit) const {
    for (index_t j = tile.begin; j < tile.end; ++j) {
      scores[j - tile.begin] += unit * static_cast<S>(-kSlope * static_cast<double>(std::abs(position - j)));
    }
  }
};
using EveryTile = PositionBiasPlan<BiasScope::kEveryTile>;
using MaskedTiles = PositionBiasPlan<BiasScope::kMaskedTiles>;
static_assert(BiasedPlan<EveryTile> && BiasedPlan<MaskedTiles> && !BiasedPlan<Full::Plan>);

template <class T, class Plan>
Tensor<T> run_plan(const Problem<T>& p) {
  const AttentionShape& s = p.shape;
  Tensor<T> out(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD);
  const TileShape tiles;
  kernel::run_tiled(driver_call(p, out.view, 2), Plan(false, s.kv_len, s.causal_offset(), tiles.key_rows), tiles);
  return out;
}

/// SPEC.md section 0 with logits sigma <q_i, k_j> - kSlope |i - j|, in double.
template <class T>
double expected(const Problem<T>& p, index_t b, index_t h, index_t i, index_t d) {
  const AttentionShape& s = p.shape;
  const index_t kv = h / s.group_size();
  std::vector<double> logits(static_cast<std::size_t>(s.kv_len));
  double top = -std::numeric_limits<double>::infinity(), z = 0, sum = 0;
  for (index_t j = 0; j < s.kv_len; ++j) {
    double dot = 0;
    for (index_t e = 0; e < s.head_dim; ++e) dot += static_cast<double>(p.q.view(b, h, i, e)) * p.k.view(b, kv, j, e);
    logits[static_cast<std::size_t>(j)] = dot / std::sqrt(static_cast<double>(s.head_dim)) - kSlope * std::abs(i - j);
    top = std::max(top, logits[static_cast<std::size_t>(j)]);
  }
  for (index_t j = 0; j < s.kv_len; ++j) {
    const double w = std::exp(logits[static_cast<std::size_t>(j)] - top);
    z += w;
    sum += w * p.v.view(b, kv, j, d);
  }
  return sum / z;
}

TEST(ScoreBias, EveryTileScopeBiasesUnmaskedTiles) {
  const AttentionShape s{1, 2, 1, 300, 600, 16, 8};  // three key tiles, none masked
  const Problem<double> p = make_problem<double>(s, InputSet::kNormal, 61);
  const Tensor<double> out = run_plan<double, EveryTile>(p);
  for (index_t h = 0; h < s.q_heads; ++h)
    for (index_t i = 0; i < s.q_len; ++i)
      for (index_t d = 0; d < s.value_dim; ++d)
        ASSERT_NEAR(out.view(0, h, i, d), expected(p, 0, h, i, d), 1e-12) << h << " " << i;
}

TEST(ScoreBias, MaskedTilesScopeLeavesUnmaskedTilesAlone) {
  const AttentionShape s{1, 2, 1, 100, 600, 16, 8};
  const Problem<float> p = make_problem<float>(s, InputSet::kNormal, 62);
  Tensor<float> full(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD);
  attention(Full{}, p.q.cview(), p.k.cview(), p.v.cview(), full.view, Options{.threads = 2});
  EXPECT_EQ((run_plan<float, MaskedTiles>(p).data), full.data);
  EXPECT_NE((run_plan<float, EveryTile>(p).data), full.data);
}

}  // namespace
}  // namespace attnkit::testing
