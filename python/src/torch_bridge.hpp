#pragma once
// The interface between the module and its companion extension attnkit._torch_tensors
// (torch_tensors.cpp, built against libtorch when its headers are there): reading a torch
// tensor's data pointer, dtype, sizes and strides, and allocating one, in C++ instead of
// through five Python attribute calls per tensor (about 0.6 us each tensor). The module itself
// never links libtorch, so `import attnkit` does not load it; the companion is imported the
// first time a torch tensor is seen (torch is loaded by then). Without it, tensor_arg.cpp reads
// the attributes.

#include <cstdint>

#include <Python.h>

namespace attnkit::python {

/// What the module needs of a tensor (dtype: a DType value, -1 for another dtype).
struct TorchTensorFacts {
  static constexpr int kMaxDims = 8;
  void* data = nullptr;
  std::int32_t dtype = -1;
  std::int32_t dims = 0;
  bool cpu = false;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[kMaxDims] = {};
};

struct TorchBridge {
  /// 1 and the facts when `object` is a torch.Tensor of at most kMaxDims dimensions, else 0
  /// (the caller then reads the object through Python, which also words its errors).
  int (*describe)(PyObject* object, TorchTensorFacts* facts);
  /// A new uninitialised contiguous CPU tensor of `dtype` (a DType value): a new reference,
  /// or nullptr with a Python exception set.
  PyObject* (*empty)(const std::int64_t* sizes, int dims, int dtype);
};

/// The companion's module name, and the name of the capsule it exports as `bridge`.
inline constexpr const char* kTorchBridgeModule = "attnkit._torch_tensors";
inline constexpr const char* kTorchBridgeCapsule = "attnkit._torch_tensors.bridge";

}  // namespace attnkit::python
