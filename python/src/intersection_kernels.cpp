// The kernels of the module's Intersection(first, Full) combinations (patterns.hpp), for every element type.

#include "call_views.hpp"

namespace attnkit::python {

void run_intersection(const IntersectionKinds& pattern, const CallViews& call) { run_attention(pattern, call); }

}  // namespace attnkit::python
