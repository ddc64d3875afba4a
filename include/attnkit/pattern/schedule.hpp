#pragma once
// attnkit::Schedule: one attention pattern per layer, any mix of kinds (MASFormer, SPEC.md
// section 10), with its cost table. attnkit::attention (and the reference, and
// attnkit::dispatch) take one layer, a std::variant of patterns, as its pattern.

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "attnkit/core/cost.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/kinds.hpp"

namespace attnkit {

/// A schedule's cost for one call shape (the same shape in every layer).
struct ScheduleCost {
  std::vector<PatternCost> layers;  // layer l: attended pairs and FLOP (PatternCost)
  PatternCost total;                // the sums (density: pairs over all layers' B Hq Lq Lk)
  PatternCost all_full;             // the same stack with every layer the schedule's full layer
  /// total over all_full: the share of an all-full stack's work the schedule keeps.
  double pairs_fraction() const {
    return all_full.attended_pairs > 0 ? total.attended_pairs / all_full.attended_pairs : 0.0;
  }
  double flops_fraction() const { return all_full.flops > 0 ? total.flops / all_full.flops : 0.0; }
};

/// One pattern per layer, each any of Ps: a layer is a std::variant<Ps...> (one std::visit
/// per call, never per tile). attnkit::Schedule lists every kind of the library; a
/// BasicSchedule of other types (a Union, a PerHead) works the same way.
///   BasicSchedule(layers, all_full): layer l runs layers[l]; all_full is the layer an
///   all-full stack would use (cost()'s baseline; default bidirectional Full).
///   masformer(layers, full_layers, sparse): causal full attention in layers
///   [0, full_layers) (the bottom of the stack, the paper's placement) and `sparse`
///   (e.g. causal block attention, BlockSparse::local(b, blocks, true), or a window) in the
///   others; the baseline is causal full attention.
///   at(layer): that layer's pattern, for attnkit::attention and attnkit::reference::attention.
/// MASFormer: arXiv 2310.12442 (full attention in a few bottom layers, block attention in the
/// rest, "up to 75%" less attention cost).
template <class... Ps>
class BasicSchedule {
 public:
  using Layer = std::variant<Ps...>;

  explicit BasicSchedule(std::vector<Layer> layers, Full all_full = Full{})
      : layers_(std::move(layers)), all_full_(all_full) {
    if (layers_.empty()) detail::reject("Schedule: layers.size()", 0, "must be >= 1");
  }

  static BasicSchedule masformer(index_t layers, index_t full_layers, Layer sparse) {
    if (layers < 1) detail::reject("Schedule::masformer: layers", layers, "must be >= 1");
    if (full_layers < 0 || full_layers > layers) {
      detail::reject("Schedule::masformer: full_layers", full_layers,
                     "must be in [0, layers = " + std::to_string(layers) + "]");
    }
    const Full causal_full{.causal = true};
    std::vector<Layer> stack(static_cast<std::size_t>(full_layers), Layer(causal_full));
    stack.resize(static_cast<std::size_t>(layers), sparse);
    return BasicSchedule(std::move(stack), causal_full);
  }

  index_t layers() const { return static_cast<index_t>(layers_.size()); }
  const Full& all_full() const { return all_full_; }

  const Layer& at(index_t layer) const {
    if (layer < 0 || layer >= layers()) {
      detail::reject("Schedule::at: layer", layer, "must be in [0, layers = " + std::to_string(layers()) + ")");
    }
    return layers_[static_cast<std::size_t>(layer)];
  }

  /// Per-layer attended pairs and FLOP (each layer's cost()), their sums, and those of the
  /// all-full stack, for calls of `shape` in every layer.
  ScheduleCost cost(const AttentionShape& shape) const {
    ScheduleCost result;
    const PatternCost full = all_full_.cost(shape);
    for (const Layer& layer : layers_) {
      result.layers.push_back(std::visit([&](const auto& pattern) { return pattern.cost(shape); }, layer));
      add(result.total, result.layers.back());
      add(result.all_full, full);
    }
    const double all_pairs = static_cast<double>(layers()) * static_cast<double>(shape.batch) *
                             static_cast<double>(shape.q_heads) * static_cast<double>(shape.q_len) *
                             static_cast<double>(shape.kv_len);
    result.total.density = all_pairs > 0 ? result.total.attended_pairs / all_pairs : 0.0;
    result.all_full.density = all_pairs > 0 ? result.all_full.attended_pairs / all_pairs : 0.0;
    return result;
  }

 private:
  static void add(PatternCost& sum, const PatternCost& layer) {
    sum.attended_pairs += layer.attended_pairs;
    sum.flops += layer.flops;
    sum.extra_flops += layer.extra_flops;
  }

  std::vector<Layer> layers_;
  Full all_full_;
};

/// Every kind of the library (the registry, pattern/kinds.hpp), one per layer.
using Schedule = Kinds::Apply<BasicSchedule>;

}  // namespace attnkit
