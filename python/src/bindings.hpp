#pragma once
// The parts of the Python module, each adding its classes and functions to `m` (module.cpp
// calls them in this order: later parts use the classes of earlier ones as arguments).

#include <pybind11/pybind11.h>

namespace attnkit::python {

void bind_patterns(pybind11::module_& m);          // patterns.cpp: shapes, mask kinds, combinations, Schedule
void bind_projection_kinds(pybind11::module_& m);  // projection_kinds.cpp: Linformer, Lsh, KernelizedRpe
void bind_attention(pybind11::module_& m);         // attention.cpp: attention, reference, dispatch
void bind_decode(pybind11::module_& m);            // decode.cpp: KV caches, append, decode

}  // namespace attnkit::python
