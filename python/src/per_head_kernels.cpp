// The kernels of the module's PerHead combinations (patterns.hpp), for every element type.

#include "call_views.hpp"

namespace attnkit::python {

void run_per_head(const PerHeadKind& pattern, const CallViews& call) { run_attention(pattern, call); }

}  // namespace attnkit::python
