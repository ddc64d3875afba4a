// Compile-fail test: q, k and v of different element types (here bfloat16 queries with float
// keys and values) must be rejected at compile time with the front door's message naming the
// rule. Built with ATTNKIT_CONTROL_BUILD all three are bfloat16 and the call must compile.
#include <attnkit/attnkit.hpp>

int main() {
#if defined(ATTNKIT_CONTROL_BUILD)
  using KeyValue = attnkit::bfloat16;
#else
  using KeyValue = float;
#endif
  attnkit::bfloat16 q[4] = {}, out[4] = {};
  KeyValue k[4] = {}, v[4] = {};
  attnkit::attention(attnkit::Full{}, attnkit::bhld(q, 1, 1, 1, 4), attnkit::bhld(k, 1, 1, 1, 4),
                     attnkit::bhld(v, 1, 1, 1, 4), attnkit::bhld(out, 1, 1, 1, 4));
  return 0;
}
