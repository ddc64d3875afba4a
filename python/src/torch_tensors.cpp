// attnkit._torch_tensors: the module's bridge to torch tensors in C++ (torch_bridge.hpp), a
// plain CPython extension built against libtorch (libtorch-dev, which python3-torch brings).

#include <iterator>

#include <ATen/ops/empty.h>
#include <Python.h>
#include <torch/csrc/autograd/python_variable.h>

#include "torch_bridge.hpp"

namespace {

using attnkit::python::TorchBridge;
using attnkit::python::TorchTensorFacts;

// DType's order (tensor_arg.hpp): float32, float64, bfloat16, float16, int32, uint8, int64.
constexpr c10::ScalarType kScalarTypes[] = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf,
                                            at::kInt,   at::kByte,   at::kLong};

int describe(PyObject* object, TorchTensorFacts* facts) {
  if (!THPVariable_Check(object)) return 0;
  const at::Tensor& tensor = THPVariable_Unpack(object);
  if (tensor.dim() > TorchTensorFacts::kMaxDims || !tensor.has_storage()) return 0;
  facts->cpu = tensor.device().is_cpu();
  facts->dtype = -1;
  for (int d = 0; d < static_cast<int>(std::size(kScalarTypes)); ++d) {
    if (tensor.scalar_type() == kScalarTypes[d]) facts->dtype = d;
  }
  facts->data = tensor.data_ptr();
  facts->dims = static_cast<std::int32_t>(tensor.dim());
  for (std::int64_t axis = 0; axis < tensor.dim(); ++axis) {
    facts->sizes[axis] = tensor.size(axis);
    facts->strides[axis] = tensor.stride(axis);
  }
  return 1;
}

PyObject* empty(const std::int64_t* sizes, int dims, int dtype) {
  try {
    return THPVariable_Wrap(at::empty(at::IntArrayRef(sizes, static_cast<std::size_t>(dims)),
                                      at::TensorOptions().dtype(kScalarTypes[dtype])));
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_MemoryError, error.what());
    return nullptr;
  }
}

const TorchBridge kBridge{&describe, &empty};

PyModuleDef module_definition = {PyModuleDef_HEAD_INIT,
                                 "_torch_tensors",
                                 "attnkit's bridge to torch tensors (internal)",
                                 -1,
                                 nullptr,
                                 nullptr,
                                 nullptr,
                                 nullptr,
                                 nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__torch_tensors() {
  PyObject* module = PyModule_Create(&module_definition);
  if (module == nullptr) return nullptr;
  PyObject* capsule = PyCapsule_New(const_cast<TorchBridge*>(&kBridge), attnkit::python::kTorchBridgeCapsule, nullptr);
  if (capsule == nullptr || PyModule_AddObject(module, "bridge", capsule) != 0) {
    Py_XDECREF(capsule);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
