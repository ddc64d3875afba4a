#pragma once
// kernel::execute: hands a plan to its executor, chosen by the plan's concept.

#include "attnkit/core/call.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/kernel/tiled_driver.hpp"

namespace attnkit::kernel {

/// A KeyTilePlan runs on the tiled online-softmax driver; an ExecutablePlan runs itself
/// (and may run the tiled driver on derived inputs). No pattern is named here.
template <class Call, class Plan>
requires ExecutionPlan<Plan, Call>
void execute(const Call& call, const Plan& plan, const TileShape& tiles) {
  if constexpr (KeyTilePlan<Plan>) {
    run_tiled(call, plan, tiles);
  } else {
    plan.execute(call);
  }
}

}  // namespace attnkit::kernel
