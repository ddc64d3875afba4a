#pragma once
// attnkit::SlidingWindow: each query attends a band of keys around its own position
// (SPEC.md section 2).

#include <algorithm>
#include <limits>

#include "attnkit/core/cost.hpp"
#include "attnkit/core/detail/score_masking.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/detail/key_tile_builder.hpp"

namespace attnkit {

/// mu_ij = 1 iff i - left <= j <= i + right and 0 <= j < Lk: two one-sided radii, inclusive;
/// positions outside the sequence are dropped, not wrapped. Symmetric radius w: left = right
/// = w (2w + 1 keys inside the sequence); causal window of w past keys: left = w, right = 0.
/// Radii are clamped to the sequence, so kUnbounded (or any radius >= Lk) means "no limit"
/// on that side: {kUnbounded, 0} is full causal attention for Lq = Lk.
/// Query i is aligned with key i (no bottom-right shift when Lq != Lk, unlike Full{.causal}).
///
/// Attention sinks (StreamingLLM, Xiao et al. 2023; SPEC.md section 2): a causal window may
/// also keep the first `sinks` keys, which every row sees from its own position on:
/// mu_ij = 1 iff j <= i and (j < sinks or i - left <= j). Rows stay causal, including rows
/// below the sink count. This differs from a Longformer global token (Global), whose row
/// attends every key and which every row attends, before or after it. Other causal bases take
/// sinks through a union: Union{base, SlidingWindow::streaming(0, sinks)}.
class SlidingWindow {
 public:
  static constexpr index_t kUnbounded = std::numeric_limits<index_t>::max();

  /// Radii `left` (keys before i) and `right` (keys after i), each >= 0.
  SlidingWindow(index_t left, index_t right) : left_(left), right_(right) {
    if (left < 0) detail::reject("SlidingWindow: left", left, "radius must be >= 0");
    if (right < 0) detail::reject("SlidingWindow: right", right, "radius must be >= 0");
  }

  /// left = right = radius.
  static SlidingWindow symmetric(index_t radius) { return SlidingWindow(radius, radius); }
  /// The last `past` keys and the query's own: left = past, right = 0.
  static SlidingWindow causal(index_t past) { return SlidingWindow(past, 0); }
  /// StreamingLLM's pattern: the last `past` keys, the query's own and the first `sinks` keys
  /// (up to the query's own position).
  static SlidingWindow streaming(index_t past, index_t sinks) { return causal(past).with_sinks(sinks); }
  /// This window with the first `sinks` keys kept too (sinks >= 0; 0 is none). Only a causal
  /// window (right = 0) takes sinks: a row that sees later keys would not stay causal.
  SlidingWindow with_sinks(index_t sinks) const {
    if (sinks < 0) detail::reject("SlidingWindow::with_sinks: sinks", sinks, "must be >= 0");
    if (sinks > 0 && right_ != 0) {
      detail::reject("SlidingWindow::with_sinks: right", right_,
                     "must be 0: attention sinks keep rows causal, so they combine with causal windows only");
    }
    SlidingWindow window = *this;
    window.sinks_ = sinks;
    return window;
  }
  /// HF Longformer's `attention_window` (even, the total width of the band): radius
  /// attention_window / 2 on each side.
  static SlidingWindow from_hf_attention_window(index_t attention_window) {
    if (attention_window <= 0 || attention_window % 2 != 0) {
      detail::reject("SlidingWindow::from_hf_attention_window: attention_window", attention_window,
                     "must be positive and even (HF Longformer's rule)");
    }
    return symmetric(attention_window / 2);
  }
  /// The Longformer and BigBird papers' "window w": the total width, radius w / 2 each side.
  static SlidingWindow from_total_width(index_t width) {
    if (width <= 0) detail::reject("SlidingWindow::from_total_width: width", width, "must be >= 1");
    return symmetric(width / 2);
  }

  index_t left() const { return left_; }
  index_t right() const { return right_; }
  index_t sinks() const { return sinks_; }

  /// Keys [begin, end) that row i attends in a sequence of kv_len keys.
  static KeyRange band(index_t i, index_t left, index_t right, index_t kv_len) {
    const index_t begin = left >= i ? 0 : i - left;
    const index_t end = right >= kv_len - i ? kv_len : i + right + 1;
    return KeyRange{std::min(begin, kv_len), std::max(end, index_t{0})};
  }
  /// The sink keys row i attends outside its band: [0, min(sinks, band begin)). They lie
  /// before the band (so the two ranges never overlap), and at or before i.
  static KeyRange sink_keys(const KeyRange& band, index_t sinks) { return KeyRange{0, std::min(sinks, band.begin)}; }

  class Mask {
   public:
    Mask(index_t left, index_t right, index_t sinks, index_t kv_len)
        : left_(left), right_(right), sinks_(sinks), kv_len_(kv_len) {}
    int multiplicity(index_t /*head*/, index_t i, index_t j) const {
      const bool in_band = (j <= i || j - i <= right_) && (j >= i || i - j <= left_);
      const bool sink = j < sinks_ && j <= i;
      return in_band || sink ? 1 : 0;
    }
    /// Attended keys of row i among `keys`: O(1).
    index_t count(index_t /*head*/, index_t i, const KeyRange& keys) const {
      const KeyRange r = band(i, left_, right_, kv_len_);
      return overlap(sink_keys(r, sinks_), keys) + overlap(r, keys);
    }
    /// Calls f(KeyRange) for the attended runs of row i in increasing order: the sinks before
    /// the band, then the band.
    template <class F>
    void for_each_span(index_t /*head*/, index_t i, F&& f) const {
      const KeyRange r = band(i, left_, right_, kv_len_);
      const KeyRange sinks = sink_keys(r, sinks_);
      if (sinks.begin < sinks.end) f(sinks);
      if (r.begin < r.end) f(r);
    }

   private:
    index_t left_, right_, sinks_, kv_len_;
  };

  /// Key tiles of a query tile [q_begin, q_end): the union of its rows' sinks, then of their
  /// bands, cut at aligned key tiles; a tile runs unmasked when it lies inside every row's
  /// keys: the first row's sinks, or [q_end - 1 - left, q_begin + right].
  class Plan {
   public:
    Plan(index_t left, index_t right, index_t sinks, index_t kv_len, index_t key_rows)
        : left_(left), right_(right), sinks_(sinks), kv_len_(kv_len), key_rows_(key_rows) {}

    template <class Visit>
    void for_each_key_tile(index_t /*head*/, index_t q_begin, index_t q_end, Visit&& visit) const {
      const KeyRange first = band(q_begin, left_, right_, kv_len_);
      const KeyRange last = band(q_end - 1, left_, right_, kv_len_);
      detail::KeyTileBuilder tiles(key_rows_, visit);
      // Band begins grow with the row, so the last row has the most sinks and the first the
      // fewest; sinks of later rows inside the first row's band are left to the bands' range.
      const KeyRange sinks = sink_keys(last, sinks_);
      tiles.add(KeyRange{0, std::min(sinks.end, first.begin)}, sink_keys(first, sinks_));
      tiles.add(KeyRange{first.begin, last.end}, KeyRange{last.begin, first.end});  // union, intersection
      tiles.finish();
    }
    /// Keeps row i's sinks [0, s) and band [begin, end), s <= begin: excludes [s, begin) and
    /// [end, tile end).
    template <class T>
    void exclude(index_t /*head*/, index_t i, const KeyTile& tile, T* scores) const {
      const KeyRange r = band(i, left_, right_, kv_len_);
      detail::exclude_inside(KeyRange{sink_keys(r, sinks_).end, r.begin}, tile, scores);
      detail::exclude_inside(KeyRange{r.end, tile.end}, tile, scores);
    }

   private:
    index_t left_, right_, sinks_, kv_len_, key_rows_;
  };

  Mask mask(const AttentionShape& shape) const { return Mask(left_, right_, sinks_, shape.kv_len); }
  Plan plan(const AttentionShape& shape, const TileShape& tiles) const {
    return Plan(left_, right_, sinks_, shape.kv_len, tiles.key_rows);
  }

  /// Pairs per head: band_pairs(Lq, Lk, left, right) plus the sinks outside the bands.
  PatternCost cost(const AttentionShape& shape) const {
    return softmax_cost(
        band_pairs(shape.q_len, shape.kv_len, left_, right_) + sink_pairs(shape.q_len, shape.kv_len, left_, sinks_),
        shape);
  }

  /// Sink keys outside the bands, summed over rows 0 .. rows - 1 in O(1): row i has
  /// clamp(i - left, 0, min(sinks, keys)) of them, i.e. min(t, s) for t = i - left >= 1.
  static double sink_pairs(index_t rows, index_t keys, index_t left, index_t sinks) {
    const double s = static_cast<double>(std::min(sinks, std::max(keys, index_t{0})));
    const double t = static_cast<double>(rows) - 1 - static_cast<double>(std::min(left, rows + keys));
    if (s <= 0 || t <= 0) return 0;
    if (t <= s) return t * (t + 1) / 2;
    return s * (s + 1) / 2 + (t - s) * s;
  }

  /// Pairs (a, b), 0 <= a < rows, 0 <= b < keys, with -left <= b - a <= right, in O(1):
  /// F(right) - F(-left - 1), where F(d) counts the pairs with b - a <= d, i.e. the sum over
  /// a of clamp(a + d + 1, 0, keys).
  static double band_pairs(index_t rows, index_t keys, index_t left, index_t right) {
    if (rows <= 0 || keys <= 0) return 0;
    const double r = static_cast<double>(rows), k = static_cast<double>(keys);
    // sum_{u = 0}^{t - 1} clamp(u, 0, keys) for real-valued t (exact for integers).
    const auto prefix = [k](double t) {
      if (t <= 0) return 0.0;
      if (t <= k + 1) return t * (t - 1) / 2;
      return k * (k + 1) / 2 + (t - k - 1) * k;
    };
    const auto at_most = [&](double d) { return prefix(d + 1 + r) - prefix(d + 1); };
    // Radii beyond rows + keys change nothing; clamping keeps kUnbounded exact in doubles.
    const double l = static_cast<double>(std::min(left, rows + keys));
    const double rr = static_cast<double>(std::min(right, rows + keys));
    return std::max(0.0, at_most(rr) - at_most(-l - 1));
  }

 private:
  index_t left_;
  index_t right_;
  index_t sinks_ = 0;
};

}  // namespace attnkit
