// The Python module attnkit._attnkit (python/attnkit/__init__.py re-exports it): pattern
// classes, attention over NumPy arrays and torch tensors, the reference and attnkit.dispatch.
// attnkit::invalid_argument derives from std::invalid_argument, which pybind11 raises as
// ValueError with the same message.

#include <pybind11/pybind11.h>

#include "attnkit/pattern/kinds.hpp"
#include "bindings.hpp"

PYBIND11_MODULE(_attnkit, m) {
  namespace py = pybind11;
  m.doc() = "attnkit: CPU attention kernels for efficient Transformers (README \"Python\")";
  attnkit::python::bind_patterns(m);
  attnkit::python::bind_projection_kinds(m);
  attnkit::python::bind_attention(m);
  attnkit::python::bind_decode(m);
  py::list names;
  for (std::string_view name : attnkit::Kinds::names) names.append(py::str(name.data(), name.size()));
  m.attr("kinds") = py::tuple(names);
}
