#pragma once
// Software prefetch of rows that a kernel will read or write at random a little later.

#include "attnkit/core/index.hpp"

namespace attnkit::simd {

/// Where a read prefetch asks its lines to go: kL2 (prefetcht1), for rows a kernel reads at
/// random a little later; kL1 (prefetcht0), for the next rows of a stream it is consuming.
enum class PrefetchLevel { kL2, kL1 };

namespace detail {

/// One cache line into L2 or L1 (prefetcht1 or prefetcht0), or exclusive for a write
/// (prefetchw, where the build targets it: -mprfchw, implied by -march=native on the machines
/// here) on x86. As inline assembly, not __builtin_prefetch: GCC counts a prefetch as free of
/// side effects, so a const member function doing nothing else is found pure and every call to
/// it removed (the first LSH row prefetch compiled to nothing, measured as "prefetch does not
/// help").
inline void prefetch_line(const void* address, bool for_write, PrefetchLevel level = PrefetchLevel::kL2) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#if defined(__PRFCHW__)
  if (for_write) {
    asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(address)));
    return;
  }
#else
  (void)for_write;  // a read prefetch: the baseline x86-64 build may not have prefetchw
#endif
  if (level == PrefetchLevel::kL1) {
    asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(address)));
  } else {
    asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(address)));
  }
#else
  (void)address;
  (void)for_write;
  (void)level;
#endif
}

}  // namespace detail

/// Asks for the cache lines of row[0 .. size) to be brought into L2 (`level` kL1: into L1;
/// exclusive when `for_write`); never faults, changes no result.
template <class T>
void prefetch_row(const T* row, index_t size, bool for_write, PrefetchLevel level = PrefetchLevel::kL2) {
  constexpr index_t kLine = 64;
  const char* bytes = reinterpret_cast<const char*>(row);
  const index_t byte_size = size * static_cast<index_t>(sizeof(T));
  for (index_t offset = 0; offset < byte_size; offset += kLine) detail::prefetch_line(bytes + offset, for_write, level);
}

/// Rows a kernel asks to be prefetched while it runs, spread over its work (decode's scores
/// and P V prefetch the next block's K and V rows, one row per row they consume, so that
/// memory stays busy while they compute): `count` rows of `elements` elements, the first at
/// `first`, `stride` elements apart, then `then_count` more rows of the same size and stride
/// from `then` (the next head's or page's rows of a decode stream: a kernel's call need not end
/// where the rows it prefetches cross a head or a page). Into L1: the rows are the next block
/// of a stream, read within microseconds (docs/notes/decode-streaming.md: on an
/// AMD EPYC family 26, half caches 9-12% faster than with prefetcht1, float and 8-bit caches
/// unchanged).
template <class E>
struct RowPrefetch {
  const E* first = nullptr;
  index_t stride = 0, count = 0, elements = 0;
  const E* then = nullptr;
  index_t then_count = 0;

  /// Rows to prefetch.
  index_t size() const { return count + then_count; }

  /// Where row i lies (nullptr when i >= size()).
  const E* address(index_t i) const {
    if (i < count) return first + i * stride;
    if (i - count < then_count) return then + (i - count) * stride;
    return nullptr;
  }

  /// Prefetches row i (none when i >= size()).
  void row(index_t i) const {
    if (const E* at = address(i)) prefetch_row(at, elements, false, PrefetchLevel::kL1);
  }

  /// Prefetches rows [begin, end) of the rows (clamped).
  void rows(index_t begin, index_t end) const {
    for (index_t i = begin; i < end; ++i) row(i);
  }

  /// The rows from `begin` on (none when begin >= size()).
  RowPrefetch from(index_t begin) const {
    if (begin < count) return {first + begin * stride, stride, count - begin, elements, then, then_count};
    begin -= count;
    if (begin >= then_count) return {};
    return {then + begin * stride, stride, then_count - begin, elements};
  }
};

}  // namespace attnkit::simd
