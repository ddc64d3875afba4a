#include <sstream>

#include <pybind11/stl.h>

#include "tensor_arg.hpp"
#include "torch_bridge.hpp"

namespace attnkit::python {

namespace {

/// torch's types and dtypes, looked up once torch has been imported by the caller (a tensor
/// argument cannot exist before); never destroyed (they would outlive the interpreter). This
/// file's function-local statics are set with the GIL held, which orders them.
struct Torch {
  py::object tensor_type;
  py::object empty;
  std::array<py::object, 7> dtypes;  // in DType order
};

const Torch* torch_if_loaded() {
  static const Torch* torch = nullptr;
  if (torch != nullptr) return torch;
  PyObject* module = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");
  if (module == nullptr) return nullptr;
  const py::handle m(module);
  if (!py::hasattr(m, "Tensor") || !py::hasattr(m, "bfloat16")) return nullptr;  // torch is still importing
  torch = new Torch{m.attr("Tensor"),
                    m.attr("empty"),
                    {m.attr("float32"), m.attr("float64"), m.attr("bfloat16"), m.attr("float16"), m.attr("int32"),
                     m.attr("uint8"), m.attr("int64")}};
  return torch;
}

const Torch& torch_module() {
  if (const Torch* torch = torch_if_loaded()) return *torch;
  py::module_::import("torch");
  return *torch_if_loaded();
}

/// attnkit._torch_tensors' bridge, imported once torch is loaded; nullptr when the companion
/// was not built (no libtorch headers), then tensors are read through their attributes.
const TorchBridge* torch_bridge() {
  static const TorchBridge* bridge = nullptr;
  static bool tried = false;
  if (!tried && torch_if_loaded() != nullptr) {
    tried = true;
    // PyCapsule_Import would import only the package, not the submodule holding the capsule.
    PyObject* companion = PyImport_ImportModule(kTorchBridgeModule);
    PyObject* capsule = companion != nullptr ? PyObject_GetAttrString(companion, "bridge") : nullptr;
    if (capsule != nullptr)
      bridge = static_cast<const TorchBridge*>(PyCapsule_GetPointer(capsule, kTorchBridgeCapsule));
    Py_XDECREF(capsule);
    Py_XDECREF(companion);
    if (bridge == nullptr) PyErr_Clear();
  }
  return bridge;
}

bool is_torch_tensor(py::handle object) {
  const Torch* torch = torch_if_loaded();
  return torch != nullptr && PyObject_IsInstance(object.ptr(), torch->tensor_type.ptr()) == 1;
}

std::string describe(py::handle object) { return py::str(py::type::handle_of(object).attr("__name__")); }

TensorArg numpy_arg(py::handle object, std::string_view name) {
  const auto array = py::reinterpret_borrow<py::array>(object);
  const auto* descr = py::detail::array_descriptor_proxy(array.dtype().ptr());
  TensorArg arg;
  arg.name = name;
  arg.library = Library::kNumpy;
  const int size = descr->elsize;
  if (descr->byteorder == '>') {
    detail::reject(std::string(name) + ".dtype", std::string(py::str(array.dtype())),
                   "must be in the machine's byte order (little-endian)");
  }
  if (descr->kind == 'f' && size == 4) {
    arg.dtype = DType::kFloat32;
  } else if (descr->kind == 'f' && size == 8) {
    arg.dtype = DType::kFloat64;
  } else if (descr->kind == 'f' && size == 2) {
    arg.dtype = DType::kFloat16;
  } else if (descr->kind == 'i' && size == 4) {
    arg.dtype = DType::kInt32;
  } else if (descr->kind == 'u' && size == 1) {
    arg.dtype = DType::kUInt8;
  } else if (descr->kind == 'i' && size == 8) {
    arg.dtype = DType::kInt64;
  } else {
    detail::reject(std::string(name) + ".dtype", std::string(py::str(array.dtype())),
                   "must be float32, float64 or float16 (int32 page tables, int64 lengths, uint8 8-bit blocks)");
  }
  arg.data = const_cast<void*>(array.data());
  arg.writable = array.writeable();
  const auto dims = static_cast<std::size_t>(array.ndim());
  arg.sizes.resize(dims);
  arg.strides.resize(dims);
  for (std::size_t axis = 0; axis < dims; ++axis) {
    const auto bytes = static_cast<index_t>(array.strides(static_cast<py::ssize_t>(axis)));
    arg.sizes[axis] = static_cast<index_t>(array.shape(static_cast<py::ssize_t>(axis)));
    if (bytes % size != 0) {
      detail::reject(std::string(name) + ".strides[" + std::to_string(axis) + "]", bytes,
                     "must be a multiple of the element size " + std::to_string(size) + " bytes");
    }
    arg.strides[axis] = bytes / size;
  }
  return arg;
}

/// The attributes torch_arg reads, as interned strings (each lookup then skips building one).
struct TorchAttributes {
  py::str is_cpu{"is_cpu"}, device{"device"}, dtype{"dtype"}, data_ptr{"data_ptr"}, shape{"shape"}, stride{"stride"};
};

const TorchAttributes& torch_attributes() {
  static const TorchAttributes* attributes = new TorchAttributes;
  return *attributes;
}

/// The integers of a tuple (torch.Size, a stride tuple) read through the C API: a pybind11
/// sequence cast of the same costs about as much as the rest of a tensor's description.
std::vector<index_t> tuple_integers(const py::object& tuple) {
  if (!PyTuple_Check(tuple.ptr())) return tuple.cast<std::vector<index_t>>();
  const Py_ssize_t size = PyTuple_GET_SIZE(tuple.ptr());
  std::vector<index_t> values(static_cast<std::size_t>(size));
  for (Py_ssize_t i = 0; i < size; ++i)
    values[static_cast<std::size_t>(i)] = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple.ptr(), i));
  if (PyErr_Occurred()) throw py::error_already_set();
  return values;
}

TensorArg torch_arg(py::handle object, std::string_view name) {
  const Torch& torch = torch_module();
  const TorchAttributes& attributes = torch_attributes();
  TensorArg arg;
  arg.name = name;
  arg.library = Library::kTorch;
  if (!object.attr(attributes.is_cpu).cast<bool>()) {
    detail::reject(std::string(name) + ".device", std::string(py::str(object.attr(attributes.device))),
                   "must be cpu (attnkit runs on CPU tensors)");
  }
  const py::object dtype = object.attr(attributes.dtype);
  std::size_t found = torch.dtypes.size();
  for (std::size_t d = 0; d < torch.dtypes.size() && found == torch.dtypes.size(); ++d) {
    if (dtype.is(torch.dtypes[d])) found = d;
  }
  if (found == torch.dtypes.size()) {
    detail::reject(std::string(name) + ".dtype", std::string(py::str(dtype)),
                   "must be torch.float32, float64, bfloat16 or float16 (int32 page tables, int64 lengths, uint8 "
                   "8-bit blocks)");
  }
  arg.dtype = static_cast<DType>(found);
  arg.data = PyLong_AsVoidPtr(object.attr(attributes.data_ptr)().ptr());
  arg.sizes = tuple_integers(object.attr(attributes.shape));
  arg.strides = tuple_integers(object.attr(attributes.stride)());
  return arg;
}

}  // namespace

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat16:
      return "float16";
    case DType::kInt32:
      return "int32";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt64:
      return "int64";
  }
  return "?";
}

index_t TensorArg::elements() const {
  index_t count = 1;
  for (index_t size : sizes) count *= size;
  return count;
}

void TensorArg::require_dims(index_t expected, std::string_view layout) const {
  if (dims() != expected) {
    detail::reject(std::string(name) + ".ndim", dims(),
                   "must be " + std::to_string(expected) + " (" + std::string(layout) + ")");
  }
}

void TensorArg::require_writable() const {
  if (!writable) detail::reject(std::string(name) + ".writeable", "False", "an output must be writable");
}

void TensorArg::require_dtype(DType expected, std::string_view rule) const {
  if (dtype != expected) detail::reject(std::string(name) + ".dtype", dtype_name(dtype), rule);
}

void TensorArg::require_library(Library expected) const {
  if (library == expected) return;
  const auto library_name = [](Library of) { return of == Library::kTorch ? "a torch tensor" : "a NumPy array"; };
  detail::reject(std::string(name), library_name(library),
                 std::string("must be ") + library_name(expected) +
                     " like q: a call's arrays are all NumPy arrays or all torch tensors");
}

void TensorArg::require_sizes(const std::vector<index_t>& expected, std::string_view rule) const {
  if (sizes != expected) {
    std::ostringstream text;
    text << "(";
    for (std::size_t axis = 0; axis < sizes.size(); ++axis) text << (axis ? ", " : "") << sizes[axis];
    text << (sizes.size() == 1 ? ",)" : ")");
    detail::reject(std::string(name) + ".shape", text.str(), rule);
  }
}

TensorArg tensor_arg(py::handle object, std::string_view name) {
  if (py::isinstance<py::array>(object)) return numpy_arg(object, name);
  if (const TorchBridge* bridge = torch_bridge()) {
    TorchTensorFacts facts;
    if (bridge->describe(object.ptr(), &facts) == 1 && facts.cpu && facts.dtype >= 0) {
      TensorArg arg;
      arg.name = name;
      arg.library = Library::kTorch;
      arg.dtype = static_cast<DType>(facts.dtype);
      arg.data = facts.data;
      arg.sizes.assign(facts.sizes, facts.sizes + facts.dims);
      arg.strides.assign(facts.strides, facts.strides + facts.dims);
      return arg;
    }  // else torch_arg reads it through Python, which words the error
  }
  if (is_torch_tensor(object)) return torch_arg(object, name);
  detail::reject(name, describe(object), "must be a NumPy array or a torch tensor");
}

py::object allocate(Library library, DType dtype, const std::vector<index_t>& sizes) {
  if (library == Library::kTorch) {
    if (const TorchBridge* bridge = torch_bridge()) {
      PyObject* tensor = bridge->empty(sizes.data(), static_cast<int>(sizes.size()), static_cast<int>(dtype));
      if (tensor == nullptr) throw py::error_already_set();
      return py::reinterpret_steal<py::object>(tensor);
    }
    const Torch& torch = torch_module();
    return torch.empty(py::cast(sizes), py::arg("dtype") = torch.dtypes[static_cast<std::size_t>(dtype)]);
  }
  const std::vector<py::ssize_t> shape(sizes.begin(), sizes.end());
  switch (dtype) {
    case DType::kFloat32:
      return py::array_t<float>(shape);
    case DType::kFloat64:
      return py::array_t<double>(shape);
    case DType::kFloat16:
      return py::array(py::dtype("float16"), shape);
    case DType::kInt32:
      return py::array_t<std::int32_t>(shape);
    case DType::kUInt8:
      return py::array_t<std::uint8_t>(shape);
    case DType::kInt64:
      return py::array_t<std::int64_t>(shape);
    case DType::kBFloat16:
      break;
  }
  detail::reject("output dtype", "bfloat16", "NumPy has no bfloat16: pass torch tensors for bfloat16 calls");
}

std::vector<index_t> index_list(py::handle object, std::string_view name) {
  try {
    return object.cast<std::vector<index_t>>();
  } catch (const py::cast_error&) {
    detail::reject(name, describe(object), "must be a sequence of integers");
  }
}

void set_score_modifiers(Options& options, double softcap, py::handle alibi_slopes) {
  options.softcap = softcap;
  if (alibi_slopes.is_none()) return;
  try {
    options.alibi_slopes = alibi_slopes.cast<std::vector<double>>();
  } catch (const py::cast_error&) {
    detail::reject("alibi_slopes", describe(alibi_slopes), "must be None or a sequence of floats, one per query head");
  }
}

}  // namespace attnkit::python
