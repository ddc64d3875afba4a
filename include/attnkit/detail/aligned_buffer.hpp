#pragma once
// AlignedBuffer<T>: an owning, zero-initialised, cache-line-aligned array for kernel scratch.

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>

#include "attnkit/core/index.hpp"

namespace attnkit::detail {

/// 64-byte alignment: one cache line and one AVX-512 register.
inline constexpr std::size_t kBufferAlignment = 64;

template <class T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(index_t count) : data_(allocate(count)), size_(count) {}

  AlignedBuffer(AlignedBuffer&&) noexcept = default;
  AlignedBuffer& operator=(AlignedBuffer&&) noexcept = default;

  T* data() const { return data_.get(); }
  index_t size() const { return size_; }
  T& operator[](index_t i) const { return data_.get()[i]; }

 private:
  struct Free {
    void operator()(T* p) const { ::operator delete[](p, std::align_val_t{kBufferAlignment}); }
  };
  static T* allocate(index_t count) {
    if (count <= 0) return nullptr;
    static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>);
    return static_cast<T*>(
        ::operator new[](static_cast<std::size_t>(count) * sizeof(T), std::align_val_t{kBufferAlignment}));
  }

  std::unique_ptr<T[], Free> data_;
  index_t size_ = 0;
};

}  // namespace attnkit::detail
