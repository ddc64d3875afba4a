// attnkit's kinds for one instruction set: compiled once per target by
// cmake/AttnkitDispatch.cmake (-march=x86-64, x86-64-v3 or x86-64-v4), which names the entry
// point through ATTNKIT_DISPATCH_TABLE and then keeps it the object's only global symbol.

#include "attnkit/attention.hpp"
#include "attnkit/dispatch/kernel_table.hpp"
#include "attnkit/simd/batch.hpp"

#ifndef ATTNKIT_DISPATCH_TABLE
#error "ATTNKIT_DISPATCH_TABLE must name this target's entry point (attnkit_dispatch_table_<target>)"
#endif

namespace {

template <class E, class Out>
void attention_entry(const attnkit::dispatch::PatternRef& pattern, const attnkit::TensorView<const E>& q,
                     const attnkit::TensorView<const E>& k, const attnkit::TensorView<const E>& v,
                     const attnkit::TensorView<Out>& out, const attnkit::TensorView<attnkit::compute_type_t<E>>* lse,
                     const attnkit::Options& options) {
  std::visit(
      [&]<class P>(const P* p) {
        if (lse == nullptr) {
          attnkit::attention(*p, q, k, v, out, options);
        } else {
          attnkit::attention(*p, q, k, v, out, *lse, options);
        }
      },
      pattern);
}

}  // namespace

extern "C" const attnkit::dispatch::KernelTable* ATTNKIT_DISPATCH_TABLE() {
  using attnkit::bfloat16;
  using attnkit::float16;
  static const attnkit::dispatch::KernelTable table{
      attnkit::simd::arch_name(),           &attention_entry<float, float>,    &attention_entry<double, double>,
      &attention_entry<bfloat16, bfloat16>, &attention_entry<bfloat16, float>, &attention_entry<float16, float16>,
      &attention_entry<float16, float>};
  return &table;
}
