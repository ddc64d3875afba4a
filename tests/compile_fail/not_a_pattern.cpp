// Compile-fail test: passing a type that is not an AttentionPattern to attnkit::attention must
// be rejected by the concept, with a diagnostic that names AttentionPattern. Built with
// ATTNKIT_CONTROL_BUILD the same call uses attnkit::Full and must compile (the control shows the
// failure comes from the constraint, not from something else in this file).
#include <attnkit/attnkit.hpp>

/// Has a predicate but neither plan() nor cost().
struct NotAPattern {
  bool allows(attnkit::index_t, attnkit::index_t, attnkit::index_t) const { return true; }
};

int main() {
#if defined(ATTNKIT_CONTROL_BUILD)
  using Pattern = attnkit::Full;
#else
  using Pattern = NotAPattern;
#endif
  float q[4] = {}, k[4] = {}, v[4] = {}, out[4] = {};
  attnkit::attention(Pattern{}, attnkit::bhld(q, 1, 1, 1, 4), attnkit::bhld(k, 1, 1, 1, 4),
                     attnkit::bhld(v, 1, 1, 1, 4), attnkit::bhld(out, 1, 1, 1, 4));
  return 0;
}
