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

template <class T>
void attention_entry(const attnkit::dispatch::PatternRef& pattern, const attnkit::TensorView<const T>& q,
                     const attnkit::TensorView<const T>& k, const attnkit::TensorView<const T>& v,
                     const attnkit::TensorView<T>& out, const attnkit::TensorView<T>* lse,
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
  static const attnkit::dispatch::KernelTable table{attnkit::simd::arch_name(), &attention_entry<float>,
                                                    &attention_entry<double>};
  return &table;
}
