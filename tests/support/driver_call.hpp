#pragma once
// The AttentionCall a test hands to kernel::run_tiled when it drives a plan written in the
// test (tests/kernel/): problem p's views, out without lse, sigma = 1 / sqrt(D).

#include <cmath>

#include "attnkit/core/call.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {

/// The call for problem p writing `out` ([B, Hq, Lq, Dv]) on `threads` threads. p and out must
/// outlive the call (it holds views of them).
template <class T>
AttentionCall<T> driver_call(const Problem<T>& p, const TensorView<T>& out, int threads) {
  return AttentionCall<T>{p.shape,
                          p.q.cview(),
                          p.k.cview(),
                          p.v.cview(),
                          out,
                          nullptr,
                          static_cast<T>(1 / std::sqrt(static_cast<double>(p.shape.head_dim))),
                          threads};
}

}  // namespace attnkit::testing
