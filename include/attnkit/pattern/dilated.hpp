#pragma once
// attnkit::Dilated: a sliding window whose positions are spaced by a per-head dilation
// (SPEC.md section 3; Longformer's dilated heads).

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "attnkit/core/cost.hpp"
#include "attnkit/core/detail/score_masking.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/detail/key_tile_builder.hpp"
#include "attnkit/pattern/detail/row_order.hpp"
#include "attnkit/pattern/sliding_window.hpp"

namespace attnkit {

/// mu_ij = 1 iff j = i + delta_h t for an integer t with -left <= t <= right, 0 <= j < Lk:
/// left + right + 1 positions spanning (left + right) delta_h + 1 tokens (the original
/// Longformer kernel's semantics). `dilations` holds delta_h >= 1 for every query head, or
/// one value shared by all; dilation 1 is SlidingWindow(left, right). As for SlidingWindow,
/// query i is aligned with key i.
///
/// Execution: queries and keys of one residue class i mod delta_h form an ordinary window on
/// a subsequence, so the plan reorders rows class by class (a ReorderingPlan) and the driver
/// gathers them while packing; the work equals a plain window's with the same radii.
class Dilated {
 public:
  Dilated(index_t left, index_t right, std::vector<index_t> dilations)
      : left_(left), right_(right), dilations_(std::make_shared<const std::vector<index_t>>(std::move(dilations))) {
    if (left < 0) detail::reject("Dilated: left", left, "radius must be >= 0");
    if (right < 0) detail::reject("Dilated: right", right, "radius must be >= 0");
    if (dilations_->empty())
      detail::reject("Dilated: dilations.size()", 0, "must be >= 1 (one shared or one per head)");
    for (std::size_t h = 0; h < dilations_->size(); ++h) {
      if ((*dilations_)[h] < 1) {
        detail::reject("Dilated: dilations[" + std::to_string(h) + "]", (*dilations_)[h], "dilation must be >= 1");
      }
    }
  }
  /// left = right = radius.
  static Dilated symmetric(index_t radius, std::vector<index_t> dilations) {
    return Dilated(radius, radius, std::move(dilations));
  }

  index_t left() const { return left_; }
  index_t right() const { return right_; }
  const std::vector<index_t>& dilations() const { return *dilations_; }

  /// What Mask and Plan share: radii, dilations and the residue classes of one call's query
  /// and key rows per head (precomputed: the driver maps rows through them per row).
  struct Geometry {
    struct HeadClasses {
      index_t dilation;
      detail::ResidueClasses queries, keys;
    };
    index_t left, right, q_len, kv_len;
    std::shared_ptr<const std::vector<HeadClasses>> heads;  // one per query head, or one shared

    const HeadClasses& of(index_t head) const {
      return (*heads)[static_cast<std::size_t>(table_of_head(static_cast<index_t>(heads->size()), head))];
    }
    index_t dilation(index_t head) const { return of(head).dilation; }
    const detail::ResidueClasses& query_classes(index_t head) const { return of(head).queries; }
    const detail::ResidueClasses& key_classes(index_t head) const { return of(head).keys; }
  };

  class Mask {
   public:
    explicit Mask(Geometry geometry) : g_(std::move(geometry)) {}
    int multiplicity(index_t head, index_t i, index_t j) const {
      const index_t d = g_.dilation(head);
      if ((j - i) % d != 0) return 0;
      const index_t t = (j - i) / d;
      return -g_.left <= t && t <= g_.right ? 1 : 0;
    }
    /// Attended keys of row i among `keys`: the keys congruent to i in the window's reach,
    /// O(1).
    index_t count(index_t head, index_t i, const KeyRange& keys) const {
      const KeyRange reach = reach_of(head, i);
      const index_t d = g_.dilation(head);
      const index_t lo = std::max(reach.begin, keys.begin), hi = std::min(reach.end, keys.end);
      if (lo >= hi) return 0;
      const index_t first = lo + ((i - lo) % d + d) % d;  // first key >= lo congruent to i
      return first < hi ? (hi - 1 - first) / d + 1 : 0;
    }
    /// Calls f(KeyRange) for the attended keys of row i, one single-key run each.
    template <class F>
    void for_each_span(index_t head, index_t i, F&& f) const {
      const KeyRange reach = reach_of(head, i);
      const index_t d = g_.dilation(head);
      for (index_t j = reach.begin + ((i - reach.begin) % d + d) % d; j < reach.end; j += d) f(KeyRange{j, j + 1});
    }

   private:
    /// Keys [i - left d, i + right d] clipped to [0, Lk).
    KeyRange reach_of(index_t head, index_t i) const {
      const index_t d = g_.dilation(head);
      // Reaches beyond Lq + Lk tokens change nothing; clamping keeps the products in range.
      const index_t limit = g_.kv_len + g_.q_len, step = std::min(d, limit);
      return SlidingWindow::band(i, std::min(g_.left, limit) * step, std::min(g_.right, limit) * step, g_.kv_len);
    }
    Geometry g_;
  };

  /// Plan coordinates: per head, rows grouped by residue class modulo the head's dilation
  /// (detail::ResidueClasses), queries over Lq and keys over Lk. Query position p (class c,
  /// index a) attends the key positions of class c with indices [a - left, a + right]: a
  /// window inside the class's run of key positions. Key tiles of a query tile come from
  /// each class it meets (one, except at class boundaries).
  class Plan {
   public:
    static constexpr bool kReorders = true;  // a RowOrder for patterns united with it

    Plan(Geometry geometry, index_t key_rows) : g_(std::move(geometry)), key_rows_(key_rows) {}

    index_t query_row(index_t head, index_t position) const { return g_.query_classes(head).row(position); }
    index_t key_row(index_t head, index_t position) const { return g_.key_classes(head).row(position); }
    index_t key_order(index_t head) const { return g_.dilation(head); }
    index_t query_position(index_t head, index_t row) const { return g_.query_classes(head).position(row); }
    index_t key_position(index_t head, index_t row) const { return g_.key_classes(head).position(row); }

    template <class Visit>
    void for_each_key_tile(index_t head, index_t q_begin, index_t q_end, Visit&& visit) const {
      const detail::ResidueClasses& queries = g_.query_classes(head);
      detail::KeyTileBuilder tiles(key_rows_, visit);
      for (index_t p = q_begin; p < q_end;) {
        const index_t c = queries.place(p).residue;
        const index_t class_end = std::min(q_end, queries.begin(c) + queries.size(c));
        const KeyRange first = row_keys(head, p), last = row_keys(head, class_end - 1);
        // Keys every row attends exist only when the tile lies inside one class.
        const bool one_class = p == q_begin && class_end == q_end;
        tiles.add(KeyRange{first.begin, last.end}, one_class ? KeyRange{last.begin, first.end} : KeyRange{});
        p = class_end;
      }
      tiles.finish();
    }
    template <class T>
    void exclude(index_t head, index_t position, const KeyTile& tile, T* scores) const {
      detail::exclude_outside(row_keys(head, position), tile, scores);
    }

    /// Key positions attended by query position p: a band inside its class's key run.
    KeyRange row_keys(index_t head, index_t position) const {
      const detail::ResidueClasses::Place place = g_.query_classes(head).place(position);
      const detail::ResidueClasses& keys = g_.key_classes(head);
      const index_t offset = keys.begin(place.residue);
      const KeyRange band = SlidingWindow::band(place.index, g_.left, g_.right, keys.size(place.residue));
      return KeyRange{offset + band.begin, offset + band.end};
    }

   private:
    Geometry g_;
    index_t key_rows_;
  };

  Mask mask(const AttentionShape& shape) const { return Mask(geometry(shape)); }
  Plan plan(const AttentionShape& shape, const TileShape& tiles) const { return Plan(geometry(shape), tiles.key_rows); }

  /// Pairs: per head and residue class, a window of the same radii on the class's rows and
  /// keys (SlidingWindow::band_pairs), O(delta) per head.
  PatternCost cost(const AttentionShape& shape) const {
    const Geometry g = geometry(shape);
    double pairs = 0;
    for (index_t h = 0; h < shape.q_heads; ++h) {
      const detail::ResidueClasses &queries = g.query_classes(h), &keys = g.key_classes(h);
      for (index_t c = 0; c < std::min(g.dilation(h), shape.q_len); ++c) {
        pairs += SlidingWindow::band_pairs(queries.size(c), keys.size(c), left_, right_);
      }
    }
    return softmax_cost_over_heads(pairs, shape);
  }

 private:
  Geometry geometry(const AttentionShape& shape) const {
    if (dilations_->size() != 1 && static_cast<index_t>(dilations_->size()) != shape.q_heads) {
      detail::reject("Dilated: dilations.size()", dilations_->size(),
                     "must be 1 (shared) or q heads = " + std::to_string(shape.q_heads));
    }
    auto heads = std::make_shared<std::vector<Geometry::HeadClasses>>();
    for (index_t d : *dilations_) {
      heads->push_back({d, detail::ResidueClasses(shape.q_len, d), detail::ResidueClasses(shape.kv_len, d)});
    }
    return Geometry{left_, right_, shape.q_len, shape.kv_len, std::move(heads)};
  }

  index_t left_;
  index_t right_;
  std::shared_ptr<const std::vector<index_t>> dilations_;
};

}  // namespace attnkit
