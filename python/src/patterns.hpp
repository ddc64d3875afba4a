#pragma once
// The patterns the Python module carries: every registered kind (pattern/kinds.hpp), bound
// as its own class and run by attnkit::dispatch, and the combinations compiled into the
// module (C++ combinations are templates, so Python can only use those instantiated here):
//   Union(first, Global)            first: SlidingWindow, Dilated, BlockSparse or BigBird
//   Intersection(first, Full)        first: SlidingWindow, Global, BlockSparse, BigBird or
//                                    Union(SlidingWindow, Global) (Full cannot plan in
//                                    Dilated's row order)
//   PerHead([...])                   alternatives: Full, SlidingWindow, Global, BlockSparse
//                                    (BigBird's masks are BlockSparse's: one variant cannot hold both)
// Union is symmetric, so Union(Global, first) is accepted too. Other combinations are an
// attnkit::invalid_argument listing these (C++ callers can write any).

#include <variant>

#include <pybind11/pybind11.h>

#include "attnkit/dispatch/kernel_table.hpp"
#include "attnkit/pattern/intersection.hpp"
#include "attnkit/pattern/kinds.hpp"
#include "attnkit/pattern/per_head.hpp"
#include "attnkit/pattern/union.hpp"

namespace attnkit::python {

namespace py = pybind11;

using UnionKinds = std::variant<Union<SlidingWindow, Global>, Union<Dilated, Global>, Union<BlockSparse, Global>,
                                Union<BigBird, Global>>;
using IntersectionKinds =
    std::variant<Intersection<SlidingWindow, Full>, Intersection<Global, Full>, Intersection<BlockSparse, Full>,
                 Intersection<BigBird, Full>, Intersection<Union<SlidingWindow, Global>, Full>>;
using PerHeadKind = PerHead<Full, SlidingWindow, Global, BlockSparse>;

/// Python's attnkit.Union: the compiled combination and the operands as given.
struct PyUnion {
  UnionKinds held;
  py::object first, second;
};
/// Python's attnkit.Intersection.
struct PyIntersection {
  IntersectionKinds held;
  py::object first, second;
};
/// Python's attnkit.PerHead.
struct PyPerHead {
  PerHeadKind held;
  py::list patterns;
};

/// The pattern of a call, by address (the Python object keeps it alive): a registered kind
/// (attnkit::dispatch runs it) or a compiled combination.
using PatternArg = std::variant<dispatch::PatternRef, const UnionKinds*, const IntersectionKinds*, const PerHeadKind*>;

/// The pattern `object` holds; anything else is an attnkit::invalid_argument.
PatternArg pattern_arg(py::handle object);

/// f(pattern) with the C++ pattern `arg` refers to: a registered kind, or the combination a
/// Union, Intersection or PerHead holds.
template <class F>
decltype(auto) visit_pattern_arg(const PatternArg& arg, F&& f) {
  return std::visit(
      [&](const auto& held) -> decltype(auto) {
        using Held = std::decay_t<decltype(held)>;
        if constexpr (std::is_same_v<Held, dispatch::PatternRef>) {
          return std::visit([&](const auto* pattern) -> decltype(auto) { return f(*pattern); }, held);
        } else if constexpr (std::is_same_v<Held, const PerHeadKind*>) {
          return f(*held);
        } else {
          return std::visit(f, *held);
        }
      },
      arg);
}

}  // namespace attnkit::python
