#pragma once
// Score modifiers (SPEC.md section 14): logit soft-capping (Gemma 2) and ALiBi (Press et al.
// 2022), applied to the scaled score of an attended pair after the mask has chosen the keys.

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"

namespace attnkit {

/// ALiBi's standard slopes for `heads` query heads (Press et al. 2022, `get_slopes`): for a
/// power of two H, m_h = 2^(-8 (h + 1) / H); otherwise, with H' the largest power of two below
/// H, the H' slopes of H' followed by the slopes of 2 H' at indices 0, 2, 4, ..., the first
/// H - H' of them. heads >= 1.
inline std::vector<double> alibi_slopes(index_t heads) {
  if (heads < 1) detail::reject("alibi_slopes: heads", heads, "must be >= 1");
  const auto power_of_two_slopes = [](index_t n, index_t count, index_t step) {
    std::vector<double> slopes;
    for (index_t h = 0; h < count; ++h)
      slopes.push_back(std::exp2(-8.0 * static_cast<double>(h * step + 1) / static_cast<double>(n)));
    return slopes;
  };
  index_t below = 1;
  while (below * 2 <= heads) below *= 2;
  std::vector<double> slopes = power_of_two_slopes(below, below, 1);
  const std::vector<double> rest = power_of_two_slopes(2 * below, heads - below, 2);
  slopes.insert(slopes.end(), rest.begin(), rest.end());
  return slopes;
}

/// The modifiers of one call: s <- softcap tanh(s / softcap) when softcap > 0, then
/// s <- s - m_h |p - j| when slopes are given (one per query head h), for query position p
/// and key j. Positions: query row i of a tensor call sits at p = i + Lk - Lq (bottom-right,
/// SPEC.md section 0), of a call over a cache at p = length - Lq + i. `slopes` views the
/// caller's Options, which outlive the call.
struct ScoreModifiers {
  double softcap = 0;
  std::span<const double> slopes = {};

  bool active() const { return softcap > 0 || !slopes.empty(); }

  /// The modified score in double, straight from the definition (the references use it).
  double apply(double score, index_t head, index_t position, index_t key) const {
    if (softcap > 0) score = softcap * std::tanh(score / softcap);
    if (!slopes.empty())
      score -= slopes[static_cast<std::size_t>(head)] * std::abs(static_cast<double>(position - key));
    return score;
  }
};

namespace detail {

/// Checks softcap (finite, >= 0; 0 is off) and the ALiBi slopes (empty, or one finite slope
/// per query head) and returns the modifiers viewing them.
inline ScoreModifiers validate_score_modifiers(double softcap, const std::vector<double>& slopes, index_t q_heads) {
  if (!(softcap >= 0) || !std::isfinite(softcap)) {
    reject("options.softcap", softcap, "must be finite and >= 0 (0 turns soft-capping off)");
  }
  if (!slopes.empty() && static_cast<index_t>(slopes.size()) != q_heads) {
    reject("options.alibi_slopes.size()", slopes.size(),
           "must be 0 or the number of query heads Hq = " + std::to_string(q_heads));
  }
  for (std::size_t h = 0; h < slopes.size(); ++h) {
    if (!std::isfinite(slopes[h]))
      reject("options.alibi_slopes[" + std::to_string(h) + "]", slopes[h], "must be finite");
  }
  return ScoreModifiers{softcap, slopes};
}

}  // namespace detail
}  // namespace attnkit
