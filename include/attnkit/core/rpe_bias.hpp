#pragma once
// attnkit::RpeBias: a relative-position bias table b_t per head (SPEC.md section 9), shared
// by KernelizedRpe (pattern/kernelized_rpe.hpp) and its executor, and by any score-bias
// policy keyed by the key-minus-query offset.

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"

namespace attnkit {

/// b_t per head for the key-minus-query offset t = j - (i + Lk - Lq) (queries aligned
/// bottom-right, as for causal attention): a table of 2 max_distance + 1 values per head over
/// t in [-max_distance, max_distance], offsets beyond it clipped to the edge values
/// (max_distance = n - 1 is the unclipped table of SPEC.md section 9). values holds P such
/// tables back to back, P = 1 (shared by every head) or Hq (checked per call). The default
/// is no bias (b = 0). Copies share the values.
class RpeBias {
 public:
  RpeBias() = default;
  RpeBias(index_t max_distance, std::vector<float> values)
      : max_distance_(max_distance), values_(std::make_shared<const std::vector<float>>(std::move(values))) {
    if (max_distance < 0) detail::reject("RpeBias max_distance", max_distance, "must be >= 0");
    const auto size = static_cast<index_t>(values_->size());
    if (size == 0 || size % width() != 0) {
      detail::reject("RpeBias values.size()", size,
                     "must be a positive multiple of 2 max_distance + 1 = " + std::to_string(width()) +
                         " (one table per head, or one shared)");
    }
    for (float value : *values_) {
      if (!std::isfinite(value)) detail::reject("RpeBias values", value, "must be finite");
    }
  }

  /// True for the zero bias (no table).
  bool empty() const { return values_ == nullptr; }
  index_t max_distance() const { return max_distance_; }
  /// P: tables stored (0 for the zero bias).
  index_t heads() const { return empty() ? 0 : static_cast<index_t>(values_->size()) / width(); }
  /// Values per table.
  index_t width() const { return 2 * max_distance_ + 1; }

  /// b_t of query head h (table h, or the shared one), t clipped to [-max_distance, max_distance].
  double at(index_t head, index_t offset) const {
    if (empty()) return 0.0;
    const index_t table = table_of_head(heads(), head);
    const index_t t = std::clamp(offset, -max_distance_, max_distance_);
    return static_cast<double>((*values_)[static_cast<std::size_t>(table * width() + t + max_distance_)]);
  }
  /// max_t b_t of head h's table: the stabiliser of c_t = exp(b_t - max b) (it cancels).
  double max_value(index_t head) const {
    if (empty()) return 0.0;
    const index_t table = table_of_head(heads(), head);
    const auto begin = values_->begin() + table * width();
    return static_cast<double>(*std::max_element(begin, begin + width()));
  }

  /// For an Lq x Lk call, per query row i: the sum of exp(b_t - max b) over the offsets t
  /// the row reaches (t = j - i - (Lk - Lq), j < Lk; causal: only t <= 0). With inputs of
  /// even size, a row's numerator and denominator scale with it, while an FFT product's
  /// error scales with the largest row's: KernelizedRpe's accuracy model. O(Lq + Lk).
  std::vector<double> reach_mass(index_t head, index_t q_len, index_t kv_len, bool causal) const {
    const index_t shift = kv_len - q_len, lowest = -(kv_len - 1);
    // prefix[t - lowest + 1] = sum of the weights of offsets lowest .. t.
    std::vector<double> prefix(static_cast<std::size_t>(std::max<index_t>(q_len + kv_len, 1)), 0.0);
    const double top = max_value(head);
    for (index_t t = lowest; t < q_len; ++t) {
      prefix[static_cast<std::size_t>(t - lowest + 1)] =
          prefix[static_cast<std::size_t>(t - lowest)] + std::exp(at(head, t) - top);
    }
    std::vector<double> mass(static_cast<std::size_t>(q_len), 0.0);
    for (index_t i = 0; i < q_len; ++i) {
      const index_t lo = -(i + shift);
      const index_t hi = causal ? std::min<index_t>(kv_len - 1 - i - shift, 0) : kv_len - 1 - i - shift;
      const index_t from = std::max(lo, lowest);
      if (hi >= from) {
        mass[static_cast<std::size_t>(i)] =
            prefix[static_cast<std::size_t>(hi - lowest + 1)] - prefix[static_cast<std::size_t>(from - lowest)];
      }
    }
    return mass;
  }

 private:
  index_t max_distance_ = 0;
  std::shared_ptr<const std::vector<float>> values_;
};

}  // namespace attnkit
