// The kernels of the module's Union(first, Global) combinations (patterns.hpp), for every element type.

#include "call_views.hpp"

namespace attnkit::python {

void run_union(const UnionKinds& pattern, const CallViews& call) { run_attention(pattern, call); }

}  // namespace attnkit::python
