#pragma once
// thread_scratch<Tag, T>(count): per-thread scratch that survives between calls.

#include "attnkit/core/index.hpp"
#include "attnkit/detail/aligned_buffer.hpp"

namespace attnkit::detail {

/// At least `count` elements of cache-line-aligned scratch owned by the calling thread, reused
/// by the next call with the same Tag on this thread. Fresh allocations each call cost page
/// faults on first touch (16 MiB of K/V panels = 4096 faults), which showed up as 7% of a
/// sliding-window call; reused memory is already mapped and warm. The buffer only grows, so a
/// thread keeps the largest scratch it has needed until it exits.
/// Contents are uninitialised. Hazard: at most one live user per (Tag, thread); every Tag
/// names one field of one owner type, and no owner outlives the call that creates it.
template <class Tag, class T>
T* thread_scratch(index_t count) {
  thread_local AlignedBuffer<T> buffer;
  if (buffer.size() < count) buffer = AlignedBuffer<T>(count);
  return buffer.data();
}

}  // namespace attnkit::detail
