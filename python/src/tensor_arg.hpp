#pragma once
// A NumPy array or a PyTorch CPU tensor seen as attnkit sees memory: a data pointer, an
// element type, sizes and strides in elements. Nothing is copied: the view borrows the
// object's memory, which the caller's reference keeps alive for the call. PyTorch is not
// linked: a tensor is read through its Python attributes (data_ptr, dtype, shape, stride),
// and the module imports torch only to allocate an output for tensor inputs.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "attnkit/core/errors.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/core/index.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/q8_block.hpp"
#include "attnkit/core/tensor_view.hpp"

namespace attnkit::python {

namespace py = pybind11;

/// The element types the module accepts (NumPy has no bfloat16): floating-point tensors,
/// int32 page tables, uint8 bytes of 8-bit cache blocks, int64 cache lengths.
enum class DType { kFloat32, kFloat64, kBFloat16, kFloat16, kInt32, kUInt8, kInt64 };

std::string_view dtype_name(DType dtype);

/// float32, float64, bfloat16 or float16.
constexpr bool is_floating(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}

/// The dtype of elements of T (8-bit cache blocks are uint8 arrays).
template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  if constexpr (std::is_same_v<T, double>) return DType::kFloat64;
  if constexpr (std::is_same_v<T, bfloat16>) return DType::kBFloat16;
  if constexpr (std::is_same_v<T, float16>) return DType::kFloat16;
  if constexpr (std::is_same_v<T, std::int32_t>) return DType::kInt32;
  if constexpr (std::is_same_v<T, q8_0_block>) return DType::kUInt8;
  if constexpr (std::is_same_v<T, std::int64_t>) return DType::kInt64;
}

/// f(std::type_identity<E>{}, std::type_identity<Out>{}) for a call whose q has dtype `q` and
/// out dtype `out`: E float, double (when kWithDouble), bfloat16 or float16; Out E, or float
/// for half E with a float32 out. Other dtypes call nothing (the callers refuse them first).
template <bool kWithDouble, class F>
void with_element_types(DType q, DType out, F&& f) {
  const bool float_out = out == DType::kFloat32;
  switch (q) {
    case DType::kFloat32:
      return f(std::type_identity<float>{}, std::type_identity<float>{});
    case DType::kFloat64:
      if constexpr (kWithDouble) return f(std::type_identity<double>{}, std::type_identity<double>{});
      break;
    case DType::kBFloat16:
      if (float_out) return f(std::type_identity<bfloat16>{}, std::type_identity<float>{});
      return f(std::type_identity<bfloat16>{}, std::type_identity<bfloat16>{});
    case DType::kFloat16:
      if (float_out) return f(std::type_identity<float16>{}, std::type_identity<float>{});
      return f(std::type_identity<float16>{}, std::type_identity<float16>{});
    default:
      break;
  }
}

/// f(std::type_identity<T>{}) for the one T of Ts whose dtype is `dtype`; any other dtype is
/// an attnkit::invalid_argument "<name>.dtype = <dtype>: <rule>".
template <class... Ts, class F>
void with_dtype(DType dtype, std::string_view name, std::string_view rule, F&& f) {
  if (!((dtype == dtype_of<Ts>() ? (f(std::type_identity<Ts>{}), true) : false) || ...)) {
    detail::reject(std::string(name) + ".dtype", dtype_name(dtype), rule);
  }
}

/// Which library the object came from (outputs are allocated by the same one).
enum class Library { kNumpy, kTorch };

/// One array argument: `name` is the Python argument's name, used in every message.
struct TensorArg {
  std::string_view name;
  Library library = Library::kNumpy;
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  std::vector<index_t> sizes;
  std::vector<index_t> strides;  // in elements
  bool writable = true;

  index_t dims() const { return static_cast<index_t>(sizes.size()); }
  index_t elements() const;

  /// The 4-D view [B, H, L, D] of elements of T (the dtype must be T's). A 3-D argument
  /// (lse [B, H, L]) gains a unit last axis.
  template <class T>
  TensorView<T> view() const {
    std::array<index_t, 4> view_sizes{1, 1, 1, 1}, view_strides{1, 1, 1, 1};
    for (std::size_t axis = 0; axis < sizes.size() && axis < 4; ++axis) {
      view_sizes[axis] = sizes[axis];
      view_strides[axis] = strides[axis];
    }
    return TensorView<T>(static_cast<T*>(data), view_sizes, view_strides);
  }

  /// Throws attnkit::invalid_argument unless the argument has `expected` dimensions.
  void require_dims(index_t expected, std::string_view layout) const;
  /// Throws attnkit::invalid_argument unless the argument can be written (outputs).
  void require_writable() const;
  /// Throws attnkit::invalid_argument unless the argument's element type is `expected`.
  void require_dtype(DType expected, std::string_view rule) const;
  /// Throws attnkit::invalid_argument unless the argument comes from `expected`: a call's
  /// arrays are all NumPy arrays or all torch tensors (the output is allocated by q's library,
  /// so a mixed call would return a type the other arguments do not predict).
  void require_library(Library expected) const;
  /// Throws attnkit::invalid_argument unless the sizes are `expected`.
  void require_sizes(const std::vector<index_t>& expected, std::string_view rule) const;
};

/// Reads `object` (a NumPy array or a torch CPU tensor; anything else, a GPU tensor or an
/// unsupported dtype is an attnkit::invalid_argument naming `name`).
TensorArg tensor_arg(py::handle object, std::string_view name);

/// A new uninitialised C-contiguous array of `sizes` and `dtype`, from `library` (torch.empty
/// or numpy.empty).
py::object allocate(Library library, DType dtype, const std::vector<index_t>& sizes);

/// std::vector of a 1-D sequence of Python integers or a 1-D integer array.
std::vector<index_t> index_list(py::handle object, std::string_view name);

/// The softcap and alibi_slopes keyword arguments into `options` (alibi_slopes: None, or a
/// sequence of floats or a 1-D array, one per query head); the C++ door checks their rules.
void set_score_modifiers(Options& options, double softcap, py::handle alibi_slopes);

}  // namespace attnkit::python
