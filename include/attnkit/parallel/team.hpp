#pragma once
// The one OpenMP region of a call and its work-sharing loops.
// Every kernel opens exactly one region (outermost, never nested) through parallel_region and
// splits work inside it with Team's loops; no other file uses OpenMP.

#include <algorithm>

#include "attnkit/core/index.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace attnkit::parallel {

/// Calls below this many FLOP run on the calling thread: a team's fork/join and barriers
/// (a few microseconds) would cost more than they save (cf. Eigen's Parallelizer threshold).
inline constexpr double kMinFlopsPerExtraThread = 4.0e6;

/// Threads for a call: `requested` (0 = OpenMP's default), reduced so that every thread
/// beyond the first has at least kMinFlopsPerExtraThread of work. A call made from inside the
/// caller's own parallel region runs on the calling thread: regions are never nested.
inline int resolve_threads(int requested, double flops) {
#if defined(_OPENMP)
  if (omp_in_parallel()) return 1;
  const int wanted = requested > 0 ? requested : omp_get_max_threads();
#else
  const int wanted = 1;
  (void)requested;
#endif
  const double affordable = 1.0 + flops / kMinFlopsPerExtraThread;
  return affordable < wanted ? std::max(1, static_cast<int>(affordable)) : wanted;
}

/// The members of a running region, seen from one thread. A team of one runs its loops
/// plainly: an `omp for` there would bind to an enclosing region of the caller's and split
/// the caller's threads' work among them.
class Team {
 public:
  static constexpr int kDynamicRun = 4;

  explicit Team(bool in_own_region) : in_own_region_(in_own_region) {}

  /// body(i) for i in [0, count), split in equal contiguous chunks; all threads wait at the end.
  template <class Body>
  void for_each_static(index_t count, Body&& body) {
    if (!in_own_region_) {
      for (index_t i = 0; i < count; ++i) body(i);
      return;
    }
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
    for (index_t i = 0; i < count; ++i) body(i);
  }

  /// body() on one thread of the team while the others wait; all threads wait at the end.
  /// For state shared by the team that one thread must build between two loops (the next
  /// TiledPass of a call that runs several passes in one region).
  template <class Body>
  void single(Body&& body) {
    if (!in_own_region_) {
      body();
      return;
    }
#if defined(_OPENMP)
#pragma omp single
#endif
    body();
  }

  /// body() on the team's first thread (the one that opened the region) while the others
  /// wait; all threads wait at the end. For shared state built between two loops that takes
  /// the builder's thread_scratch (a TiledPass per step of a loop of passes): the same thread
  /// builds every step, so its scratch is reused, where single() may pick a different thread
  /// each time and leave a copy of the scratch on every thread.
  template <class Body>
  void leader(Body&& body) {
    if (!in_own_region_) {
      body();
      return;
    }
#if defined(_OPENMP)
#pragma omp masked
#endif
    body();
#if defined(_OPENMP)
#pragma omp barrier
#endif
  }

  /// body(i) for i in [0, count), handed out in runs of kDynamicRun consecutive items in
  /// increasing i as threads free up; all threads wait at the end. Callers order items
  /// heaviest first and put items sharing data next to each other: a thread then takes
  /// neighbouring query tiles, whose key tiles overlap and are still in its cache (with runs
  /// of one, two threads alternated tiles and each fetched every key block again).
  template <class Body>
  void for_each_dynamic(index_t count, Body&& body) {
    if (!in_own_region_) {
      for (index_t i = 0; i < count; ++i) body(i);
      return;
    }
#if defined(_OPENMP)
#pragma omp for schedule(dynamic, kDynamicRun)
#endif
    for (index_t i = 0; i < count; ++i) body(i);
  }

 private:
  bool in_own_region_;
};

/// Flush-to-zero on the calling thread while it lives (the FTZ bit of SSE's MXCSR, restored as
/// it was by the destructor). An arithmetic result below the smallest normal number becomes 0
/// (float: 2^-126, about 1.2e-38) instead of a subnormal, which x86 cores compute in a
/// microcode assist of ~100 cycles. The softmax executors (the tiled driver's pass, decode) set
/// it on every thread of their region: weights of scores far below a row's max underflow
/// there, and with ALiBi's distance penalties full attention ran 12% slower without it on an
/// Intel Xeon (docs/notes/serving-modifiers.md), while a weight below 2^-126 of the row's
/// largest changes nothing that SPEC.md's tolerances see. Kernelized RPE does not: its
/// denominators may be legitimately subnormal. Subnormal inputs are still read as they are (no
/// DAZ), and every thread sets it, so results keep their bits across thread counts.
class FlushToZero {
 public:
#if defined(__SSE__)
  FlushToZero() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFlushToZero); }
  ~FlushToZero() { _mm_setcsr(saved_); }

 private:
  static constexpr unsigned kFlushToZero = 0x8000;
  unsigned saved_;
#else
  FlushToZero() = default;
#endif

 public:
  FlushToZero(const FlushToZero&) = delete;
  FlushToZero& operator=(const FlushToZero&) = delete;
};

/// Runs body(Team&) on `threads` threads (one thread: no region is opened).
template <class Body>
void parallel_region(int threads, Body&& body) {
#if defined(_OPENMP)
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    {
      Team team(true);
      body(team);
    }
    return;
  }
#endif
  Team team(false);
  body(team);
}

}  // namespace attnkit::parallel
