#pragma once
// Row orders: how a reordering plan (ReorderingPlan) numbers query and key rows, and the
// residue-class order of dilated windows (SPEC.md section 3).

#include <algorithm>
#include <concepts>

#include "attnkit/core/index.hpp"

namespace attnkit {

/// Where rows sit in a plan's coordinates: query row i of head h at query_position(h, i),
/// key row j at key_position(h, j). kReorders is false only for the identity, which lets
/// users of an order keep one copy of per-head data.
template <class Order>
concept RowOrder = requires(const Order& order, index_t head, index_t row) {
  { order.query_position(head, row) } -> std::same_as<index_t>;
  { order.key_position(head, row) } -> std::same_as<index_t>;
  { Order::kReorders } -> std::convertible_to<bool>;
};

namespace detail {

/// Rows in their own order.
struct IdentityOrder {
  static constexpr bool kReorders = false;
  index_t query_position(index_t /*head*/, index_t row) const { return row; }
  index_t key_position(index_t /*head*/, index_t row) const { return row; }
};

/// Rows [0, length) grouped by residue class modulo `dilation`: class c (rows c, c + d,
/// c + 2d, ...) takes positions [begin(c), begin(c) + size(c)), in increasing row order.
/// With length = q d + r, the first r classes hold q + 1 rows and the others q. O(1) maps.
class ResidueClasses {
 public:
  ResidueClasses(index_t length, index_t dilation)
      : dilation_(dilation), quotient_(length / dilation), remainder_(length % dilation) {}

  index_t size(index_t c) const { return quotient_ + (c < remainder_ ? 1 : 0); }
  index_t begin(index_t c) const { return c * quotient_ + std::min(c, remainder_); }
  /// The class of position p and p's index inside it.
  struct Place {
    index_t residue;
    index_t index;
  };
  Place place(index_t position) const {
    const index_t long_part = remainder_ * (quotient_ + 1);  // positions of the longer classes
    if (position < long_part) return Place{position / (quotient_ + 1), position % (quotient_ + 1)};
    const index_t rest = position - long_part;
    return Place{remainder_ + rest / quotient_, rest % quotient_};
  }
  index_t row(index_t position) const {
    const Place p = place(position);
    return p.residue + p.index * dilation_;
  }
  index_t position(index_t row) const { return begin(row % dilation_) + row / dilation_; }

 private:
  index_t dilation_;
  index_t quotient_;
  index_t remainder_;
};

}  // namespace detail
}  // namespace attnkit
