#pragma once
// TensorView<T>: a non-owning 4-D strided view [batch, heads, seq, dim] with unit last stride.

#include <array>
#include <string>
#include <type_traits>

#include "attnkit/core/errors.hpp"
#include "attnkit/core/index.hpp"

namespace attnkit {

/// Axis numbers of a TensorView.
enum Axis : int { kBatch = 0, kHeads = 1, kSeq = 2, kDim = 3 };

/// "batch", "heads", "seq" or "dim": the axis as error messages name it.
inline const char* axis_name(int axis) {
  static const char* const names[] = {"batch", "heads", "seq", "dim"};
  return names[axis];
}

/// A 4-D view [batch, heads, seq, dim] over memory owned by the caller. Element (b, h, l, d)
/// lives at data + b*stride(0) + h*stride(1) + l*stride(2) + d; attention requires stride(3) = 1
/// so that every row is contiguous. Constructing a view checks nothing; attnkit::attention
/// validates every view it is given and names the offending argument.
/// `T` may be const (inputs) or not (outputs); a view converts to its const counterpart.
template <class T>
class TensorView {
 public:
  using value_type = std::remove_const_t<T>;

  constexpr TensorView() = default;
  constexpr TensorView(T* data, std::array<index_t, 4> sizes, std::array<index_t, 4> strides)
      : data_(data), sizes_(sizes), strides_(strides) {}

  /// const conversion: TensorView<float> -> TensorView<const float>.
  template <class U>
  requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>) constexpr TensorView(
      const TensorView<U>& other)  // NOLINT(google-explicit-constructor)
      : data_(other.data()), sizes_(other.sizes()), strides_(other.strides()) {}

  constexpr T* data() const { return data_; }
  constexpr const std::array<index_t, 4>& sizes() const { return sizes_; }
  constexpr const std::array<index_t, 4>& strides() const { return strides_; }
  constexpr index_t size(int axis) const { return sizes_[axis]; }
  constexpr index_t stride(int axis) const { return strides_[axis]; }

  constexpr index_t batch() const { return sizes_[kBatch]; }
  constexpr index_t heads() const { return sizes_[kHeads]; }
  constexpr index_t seq() const { return sizes_[kSeq]; }
  constexpr index_t dim() const { return sizes_[kDim]; }

  /// Pointer to the contiguous row (b, h, l, 0 .. dim).
  constexpr T* row(index_t b, index_t h, index_t l) const {
    return data_ + b * strides_[kBatch] + h * strides_[kHeads] + l * strides_[kSeq];
  }
  constexpr T& operator()(index_t b, index_t h, index_t l, index_t d) const { return row(b, h, l)[d * strides_[kDim]]; }

  /// Rows first .. first + count of batch b (every head) as a view [1, H, count, D] with the
  /// same strides: one sequence of a packed layout, a cache sequence's newest rows.
  constexpr TensorView rows(index_t b, index_t first, index_t count) const {
    return TensorView(row(b, 0, first), {1, heads(), count, dim()}, strides_);
  }

 private:
  T* data_ = nullptr;
  std::array<index_t, 4> sizes_{};
  std::array<index_t, 4> strides_{};
};

namespace detail {

/// View of a contiguous buffer holding the [B, H, L, D] axes in memory order `order`
/// (outermost first, e.g. {0, 2, 1, 3} for [B, L, H, D]). Rejects negative sizes and element
/// counts that overflow int64, naming `helper`.
template <class T>
TensorView<T> contiguous_view(const char* helper, T* data, std::array<index_t, 4> sizes, std::array<int, 4> order) {
  static const char* const names[] = {"B", "H", "L", "D"};
  for (int axis = 0; axis < 4; ++axis) {
    if (sizes[axis] < 0) reject(std::string(helper) + ": " + names[axis], sizes[axis], "sizes must be >= 0");
  }
  std::array<index_t, 4> strides{};
  index_t extent = 1;
  for (int position = 3; position >= 0; --position) {
    const int axis = order[position];
    strides[axis] = extent;
    if (__builtin_mul_overflow(extent, sizes[axis], &extent)) {
      reject(std::string(helper) + ": " + names[axis], sizes[axis], "the element count overflows int64");
    }
  }
  return TensorView<T>(data, sizes, strides);
}

}  // namespace detail

/// View of a contiguous [B, H, L, D] buffer (PyTorch's default attention layout).
template <class T>
TensorView<T> bhld(T* data, index_t B, index_t H, index_t L, index_t D) {
  return detail::contiguous_view("bhld", data, {B, H, L, D}, {kBatch, kHeads, kSeq, kDim});
}

/// View of a contiguous [B, L, H, D] buffer (the layout a fused QKV projection produces),
/// seen as [B, H, L, D] through strides; no copy.
template <class T>
TensorView<T> blhd(T* data, index_t B, index_t L, index_t H, index_t D) {
  return detail::contiguous_view("blhd", data, {B, H, L, D}, {kBatch, kSeq, kHeads, kDim});
}

/// View of a contiguous [B, H, L] log-sum-exp buffer, as the [B, H, L, 1] TensorView that the
/// lse overload of attnkit::attention takes.
template <class T>
TensorView<T> lse_view(T* data, index_t B, index_t H, index_t L) {
  return bhld(data, B, H, L, 1);
}

}  // namespace attnkit
