#pragma once
// Software prefetch of rows that a kernel will read or write at random a little later.

#include "attnkit/core/index.hpp"

namespace attnkit::simd {

namespace detail {

/// One cache line into L2 (prefetcht1), or exclusive for a write (prefetchw, where the build
/// targets it: -mprfchw, implied by -march=native on the machines here) on x86. As inline
/// assembly, not __builtin_prefetch: GCC counts a prefetch as free of side effects, so a
/// const member function doing nothing else is found pure and every call to it removed (the
/// first LSH row prefetch compiled to nothing, measured as "prefetch does not help").
inline void prefetch_line(const void* address, bool for_write) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#if defined(__PRFCHW__)
  if (for_write) {
    asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(address)));
    return;
  }
#else
  (void)for_write;  // a read prefetch: the baseline x86-64 build may not have prefetchw
#endif
  asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(address)));
#else
  (void)address;
  (void)for_write;
#endif
}

}  // namespace detail

/// Asks for the cache lines of row[0 .. size) to be brought into L2 (exclusive when
/// `for_write`); never faults, changes no result.
template <class T>
void prefetch_row(const T* row, index_t size, bool for_write) {
  constexpr index_t kLine = 64;
  const char* bytes = reinterpret_cast<const char*>(row);
  const index_t byte_size = size * static_cast<index_t>(sizeof(T));
  for (index_t offset = 0; offset < byte_size; offset += kLine) detail::prefetch_line(bytes + offset, for_write);
}

}  // namespace attnkit::simd
