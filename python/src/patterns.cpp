// The pattern classes of the Python module: one per registered kind, named and parameterised
// as the C++ ones, the compiled combinations (patterns.hpp), Schedule, and the inspection
// functions cost, attended_keys and ascii_view.

#include <optional>
#include <sstream>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "attnkit/pattern/ascii_view.hpp"
#include "attnkit/pattern/attended_keys.hpp"
#include "attnkit/pattern/schedule.hpp"
#include "bindings.hpp"
#include "patterns.hpp"
#include "tensor_arg.hpp"

namespace attnkit::python {

namespace {

std::string type_name(py::handle object) { return py::str(py::type::handle_of(object).attr("__name__")); }

template <class T>
std::string list_text(const std::vector<T>& values) {
  std::ostringstream text;
  text << "[";
  for (std::size_t i = 0; i < values.size(); ++i) text << (i ? ", " : "") << values[i];
  text << "]";
  return text.str();
}

/// The alternative of a two-operand combination variant whose operand types match (a, b).
template <class Variant>
std::optional<Variant> match_operands(py::handle a, py::handle b) {
  std::optional<Variant> found;
  const auto try_alternative = [&]<class Alternative>(std::type_identity<Alternative>) {
    using First = decltype(Alternative::first);
    using Second = decltype(Alternative::second);
    if (!found && py::isinstance<First>(a) && py::isinstance<Second>(b)) {
      found = Variant(Alternative{a.cast<const First&>(), b.cast<const Second&>()});
    }
  };
  [&]<class... Alternatives>(std::type_identity<std::variant<Alternatives...>>) {
    (try_alternative(std::type_identity<Alternatives>{}), ...);
  }(std::type_identity<Variant>{});
  return found;
}

/// An Intersection operand that is itself a Python Union: the C++ Union it holds.
std::optional<IntersectionKinds> match_intersection(py::handle a, py::handle b) {
  if (py::isinstance<PyUnion>(a) && py::isinstance<Full>(b)) {
    const auto* window = std::get_if<Union<SlidingWindow, Global>>(&a.cast<const PyUnion&>().held);
    if (window != nullptr) return IntersectionKinds(Intersection{*window, b.cast<const Full&>()});
  }
  return match_operands<IntersectionKinds>(a, b);
}

PerHeadKind::Choice per_head_choice(py::handle pattern, std::size_t head) {
  if (py::isinstance<Full>(pattern)) return pattern.cast<const Full&>();
  if (py::isinstance<SlidingWindow>(pattern)) return pattern.cast<const SlidingWindow&>();
  if (py::isinstance<Global>(pattern)) return pattern.cast<const Global&>();
  if (py::isinstance<BlockSparse>(pattern)) return pattern.cast<const BlockSparse&>();
  detail::reject("PerHead: patterns[" + std::to_string(head) + "]", type_name(pattern),
                 "must be Full, SlidingWindow, Global or BlockSparse (the alternatives compiled into the "
                 "Python module; a per-head dilation is Dilated's own parameter)");
}

Schedule::Layer schedule_layer(py::handle pattern, std::string_view name) {
  std::optional<Schedule::Layer> layer;
  Kinds::for_each([&]<class P>(std::type_identity<P>, std::size_t) {
    if (!layer && py::isinstance<P>(pattern)) layer = pattern.cast<const P&>();
  });
  if (!layer) detail::reject(name, type_name(pattern), "must be a registered kind (attnkit.kinds)");
  return *layer;
}

/// Python's value of a Schedule layer: an object of the held kind's class.
py::object layer_object(const Schedule::Layer& layer) {
  return std::visit([](const auto& pattern) { return py::cast(pattern); }, layer);
}

template <class P>
constexpr bool kCountsKeys = requires(const P& pattern, const AttentionShape& shape) {
  {pattern.mask(shape).count(index_t{}, index_t{}, KeyRange{})};
};

template <class Class>
void add_cost(Class& cls) {
  using P = typename Class::type;
  cls.def(
      "cost", [](const P& pattern, const AttentionShape& shape) { return pattern.cost(shape); }, py::arg("shape"),
      "Attended pairs, FLOP and density of a call of this shape.");
}

void bind_shapes(py::module_& m) {
  py::class_<AttentionShape>(m, "AttentionShape",
                             "Sizes of one call: q [batch, q_heads, q_len, head_dim], k [batch, kv_heads, kv_len, "
                             "head_dim], v [batch, kv_heads, kv_len, value_dim].")
      .def(py::init([](index_t batch, index_t q_heads, std::optional<index_t> kv_heads, index_t q_len,
                       std::optional<index_t> kv_len, index_t head_dim, std::optional<index_t> value_dim) {
             return AttentionShape{batch,
                                   q_heads,
                                   kv_heads.value_or(q_heads),
                                   q_len,
                                   kv_len.value_or(q_len),
                                   head_dim,
                                   value_dim.value_or(head_dim)};
           }),
           py::kw_only(), py::arg("batch") = 1, py::arg("q_heads") = 1, py::arg("kv_heads") = py::none(),
           py::arg("q_len"), py::arg("kv_len") = py::none(), py::arg("head_dim") = 64,
           py::arg("value_dim") = py::none())
      .def_readwrite("batch", &AttentionShape::batch)
      .def_readwrite("q_heads", &AttentionShape::q_heads)
      .def_readwrite("kv_heads", &AttentionShape::kv_heads)
      .def_readwrite("q_len", &AttentionShape::q_len)
      .def_readwrite("kv_len", &AttentionShape::kv_len)
      .def_readwrite("head_dim", &AttentionShape::head_dim)
      .def_readwrite("value_dim", &AttentionShape::value_dim)
      .def("__eq__", [](const AttentionShape& a, const AttentionShape& b) { return a == b; })
      .def("__repr__", [](const AttentionShape& s) {
        std::ostringstream text;
        text << "AttentionShape(batch=" << s.batch << ", q_heads=" << s.q_heads << ", kv_heads=" << s.kv_heads
             << ", q_len=" << s.q_len << ", kv_len=" << s.kv_len << ", head_dim=" << s.head_dim
             << ", value_dim=" << s.value_dim << ")";
        return text.str();
      });

  py::class_<PatternCost>(m, "PatternCost", "Attended pairs, FLOP (extra_flops: work beyond the softmax) and density.")
      .def_readonly("attended_pairs", &PatternCost::attended_pairs)
      .def_readonly("flops", &PatternCost::flops)
      .def_readonly("density", &PatternCost::density)
      .def_readonly("extra_flops", &PatternCost::extra_flops)
      .def("__repr__", [](const PatternCost& c) {
        std::ostringstream text;
        text << "PatternCost(attended_pairs=" << c.attended_pairs << ", flops=" << c.flops << ", density=" << c.density
             << ", extra_flops=" << c.extra_flops << ")";
        return text.str();
      });
}

void bind_window_kinds(py::module_& m) {
  py::class_<Full> full(m, "Full", "Full attention; causal is bottom-right aligned (j <= i + Lk - Lq).");
  full.def(py::init([](bool causal) { return Full{.causal = causal}; }), py::arg("causal") = false)
      .def_readonly("causal", &Full::causal)
      .def("__repr__", [](const Full& p) { return std::string("Full(causal=") + (p.causal ? "True" : "False") + ")"; });
  add_cost(full);

  py::class_<SlidingWindow> window(m, "SlidingWindow",
                                   "Keys i - left ... i + right (inclusive radii); a causal window (right = 0) may "
                                   "also keep the first `sinks` keys, up to the row's own position (StreamingLLM).");
  window
      .def(py::init(
               [](index_t left, index_t right, index_t sinks) { return SlidingWindow(left, right).with_sinks(sinks); }),
           py::arg("left"), py::arg("right"), py::arg("sinks") = 0)
      .def_static("symmetric", &SlidingWindow::symmetric, py::arg("radius"))
      .def_static("causal", &SlidingWindow::causal, py::arg("radius"))
      .def_static("streaming", &SlidingWindow::streaming, py::arg("past"), py::arg("sinks"),
                  "StreamingLLM: the last `past` keys, the row's own and the first `sinks` keys; rows stay causal.")
      .def_static("from_hf_attention_window", &SlidingWindow::from_hf_attention_window, py::arg("attention_window"))
      .def_static("from_total_width", &SlidingWindow::from_total_width, py::arg("width"))
      .def_property_readonly("left", &SlidingWindow::left)
      .def_property_readonly("right", &SlidingWindow::right)
      .def_property_readonly("sinks", &SlidingWindow::sinks)
      .def("__repr__", [](const SlidingWindow& p) {
        return "SlidingWindow(left=" + std::to_string(p.left()) + ", right=" + std::to_string(p.right()) +
               (p.sinks() > 0 ? ", sinks=" + std::to_string(p.sinks()) : std::string()) + ")";
      });
  add_cost(window);

  py::class_<Dilated> dilated(m, "Dilated",
                              "Keys i + d_h t, -left <= t <= right, one dilation per query head or shared.");
  dilated
      .def(py::init([](index_t left, index_t right, py::handle dilations) {
             return Dilated(left, right, index_list(dilations, "Dilated: dilations"));
           }),
           py::arg("left"), py::arg("right"), py::arg("dilations"))
      .def_static(
          "symmetric",
          [](index_t radius, py::handle dilations) {
            return Dilated::symmetric(radius, index_list(dilations, "Dilated.symmetric: dilations"));
          },
          py::arg("radius"), py::arg("dilations"))
      .def_property_readonly("left", &Dilated::left)
      .def_property_readonly("right", &Dilated::right)
      .def_property_readonly("dilations", &Dilated::dilations)
      .def("__repr__", [](const Dilated& p) {
        return "Dilated(left=" + std::to_string(p.left()) + ", right=" + std::to_string(p.right()) +
               ", dilations=" + list_text(p.dilations()) + ")";
      });
  add_cost(dilated);

  py::class_<Global> global(m, "Global", "Global tokens: they attend every key and every query attends them.");
  global
      .def(py::init([](py::handle tokens) { return Global(index_list(tokens, "Global: tokens")); }), py::arg("tokens"))
      .def_property_readonly("tokens", &Global::tokens)
      .def("__repr__", [](const Global& p) { return "Global(" + list_text(p.tokens()) + ")"; });
  add_cost(global);
}

void bind_block_kinds(py::module_& m) {
  py::class_<BlockLayout>(m, "BlockLayout", "Which key blocks each query block attends.")
      .def_static(
          "from_bitmap",
          [](py::handle bitmap) {
            const auto bits = py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast>::ensure(bitmap);
            if (!bits || bits.ndim() != 2) {
              detail::reject("BlockLayout.from_bitmap: bitmap", type_name(bitmap),
                             "must be a 2-D array-like [query_blocks, key_blocks] of 0/1");
            }
            return BlockLayout::from_bitmap(bits.shape(0), bits.shape(1),
                                            std::vector<std::uint8_t>(bits.data(), bits.data() + bits.size()));
          },
          py::arg("bitmap"))
      .def_static("from_rows", &BlockLayout::from_rows, py::arg("key_blocks"), py::arg("rows"))
      .def_property_readonly("query_blocks", &BlockLayout::query_blocks)
      .def_property_readonly("key_blocks", &BlockLayout::key_blocks)
      .def_property_readonly("nonzeros", &BlockLayout::nonzeros)
      .def(
          "row",
          [](const BlockLayout& layout, index_t p) {
            if (p < 0 || p >= layout.query_blocks()) {
              detail::reject("BlockLayout.row: p", p,
                             "must lie in [0, query_blocks = " + std::to_string(layout.query_blocks()) + ")");
            }
            const auto row = layout.row(p);
            return std::vector<index_t>(row.begin(), row.end());
          },
          py::arg("p"))
      .def("__eq__", [](const BlockLayout& a, const BlockLayout& b) { return a == b; })
      .def("__repr__", [](const BlockLayout& l) {
        return "BlockLayout(query_blocks=" + std::to_string(l.query_blocks()) +
               ", key_blocks=" + std::to_string(l.key_blocks()) + ", nonzeros=" + std::to_string(l.nonzeros()) + ")";
      });

  py::class_<BlockSparse> block(m, "BlockSparse", "Block-sparse attention: one BlockLayout per query head or shared.");
  block
      .def(py::init<index_t, std::vector<BlockLayout>, bool>(), py::arg("block_size"), py::arg("layouts"),
           py::arg("causal") = false)
      .def_static("blockbert", &BlockSparse::blockbert, py::arg("block_size"), py::arg("permutations"))
      .def_static("cyclic_shifts", &BlockSparse::cyclic_shifts, py::arg("block_size"), py::arg("blocks"),
                  py::arg("shifts"))
      .def_static("local", &BlockSparse::local, py::arg("block_size"), py::arg("blocks"), py::arg("causal") = false)
      .def_property_readonly("block_size", &BlockSparse::block_size)
      .def_property_readonly("causal", static_cast<bool (BlockSparse::*)() const>(&BlockSparse::causal))
      .def_property_readonly("layouts", &BlockSparse::layouts)
      .def("__repr__", [](const BlockSparse& p) {
        return "BlockSparse(block_size=" + std::to_string(p.block_size()) + ", layouts=<" +
               std::to_string(p.layouts().size()) + ">, causal=" + (p.causal() ? "True" : "False") + ")";
      });
  add_cost(block);

  py::class_<BigBird> big_bird(m, "BigBird",
                               "ITC BigBird: global first/last blocks, a one-block window, r random blocks.");
  big_bird
      .def(py::init<index_t, index_t, std::uint64_t, std::uint64_t>(), py::arg("block_size") = 64,
           py::arg("random_blocks") = 3, py::arg("seed") = 0, py::arg("layer") = 0)
      .def_static(
          "from_table",
          [](index_t block_size, py::handle table) {
            const auto entries = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(table);
            if (!entries || entries.ndim() != 3) {
              detail::reject("BigBird.from_table: table", type_name(table),
                             "must be an integer array [heads, blocks - 2, r] (HF's rand_attn)");
            }
            return BigBird::from_table(block_size, entries.shape(1) + 2, entries.shape(0),
                                       std::vector<index_t>(entries.data(), entries.data() + entries.size()));
          },
          py::arg("block_size"), py::arg("table"),
          "BigBird whose random blocks are given: HF's rand_attn [heads, blocks - 2, r] (rows of blocks 1 .. "
          "blocks - 2), with HF's multiplicities: a block the row's window, global blocks and entries name m times "
          "enters its softmax m times (HF's eval-mode table, all zeros, counts block 0 1 + r times)")
      .def_property_readonly("repeats_blocks", &BigBird::repeats_blocks,
                             "Whether a given table names some block twice for a row (keys with multiplicity > 1)")
      .def_property_readonly("block_size", &BigBird::block_size)
      .def_property_readonly("random_blocks", &BigBird::random_blocks)
      .def_property_readonly("has_given_table", &BigBird::has_given_table)
      .def(
          "random_table",
          [](const BigBird& p, index_t heads, index_t blocks) {
            std::vector<index_t> table = p.random_table(heads, blocks);
            py::array_t<std::int64_t> result({heads, blocks, p.random_blocks()});
            std::copy(table.begin(), table.end(), result.mutable_data());
            return result;
          },
          py::arg("heads"), py::arg("blocks"),
          "[heads, blocks, random_blocks] int64: each block row's random key blocks (-1: none drawn)")
      .def("__repr__", [](const BigBird& p) {
        return "BigBird(block_size=" + std::to_string(p.block_size()) +
               ", random_blocks=" + std::to_string(p.random_blocks()) + ")";
      });
  add_cost(big_bird);
}

/// A two-operand combination's class: `match(a, b)` finds the compiled alternative for the
/// operands in that order (tried both ways: both combinations are symmetric), `rule` names the
/// compiled set in the error.
template <class Combination, class Match>
void bind_operand_pair(py::module_& m, const char* name, const char* doc, Match match, const char* rule) {
  const std::string type = name;
  py::class_<Combination>(m, name, doc)
      .def(py::init([=](py::object first, py::object second) {
             if (auto held = match(first, second)) return Combination{*held, first, second};
             if (auto held = match(second, first)) return Combination{*held, first, second};
             detail::reject(type + ": (first, second)", "(" + type_name(first) + ", " + type_name(second) + ")", rule);
           }),
           py::arg("first"), py::arg("second"))
      .def_readonly("first", &Combination::first)
      .def_readonly("second", &Combination::second)
      .def(
          "cost",
          [](const Combination& p, const AttentionShape& s) {
            return std::visit([&](const auto& held) { return held.cost(s); }, p.held);
          },
          py::arg("shape"))
      .def("__repr__", [type](const Combination& p) {
        return type + "(" + std::string(py::repr(p.first)) + ", " + std::string(py::repr(p.second)) + ")";
      });
}

void bind_combinations(py::module_& m) {
  bind_operand_pair<PyUnion>(
      m, "Union", "The pairs either pattern attends (see the module's combinations).",
      [](py::handle a, py::handle b) { return match_operands<UnionKinds>(a, b); },
      "the Python module compiles Union of SlidingWindow, Dilated, BlockSparse or BigBird with Global (either order); "
      "C++ callers can combine any masked patterns");
  bind_operand_pair<PyIntersection>(
      m, "Intersection", "The pairs both patterns attend (see the module's combinations).", &match_intersection,
      "the Python module compiles Intersection of SlidingWindow, Global, BlockSparse, BigBird or Union(SlidingWindow, "
      "Global) with Full (either order)");

  py::class_<PyPerHead>(m, "PerHead", "Query head h follows patterns[h].")
      .def(py::init([](py::list patterns) {
             std::vector<PerHeadKind::Choice> choices;
             for (std::size_t h = 0; h < patterns.size(); ++h) choices.push_back(per_head_choice(patterns[h], h));
             return PyPerHead{PerHeadKind(std::move(choices)), patterns};
           }),
           py::arg("patterns"))
      .def_readonly("patterns", &PyPerHead::patterns)
      .def(
          "cost", [](const PyPerHead& p, const AttentionShape& s) { return p.held.cost(s); }, py::arg("shape"))
      .def("__repr__", [](const PyPerHead& p) { return "PerHead(" + std::string(py::repr(p.patterns)) + ")"; });
}

void bind_schedule(py::module_& m) {
  py::class_<ScheduleCost>(m, "ScheduleCost", "Per-layer costs, their total and an all-full stack's.")
      .def_readonly("layers", &ScheduleCost::layers)
      .def_readonly("total", &ScheduleCost::total)
      .def_readonly("all_full", &ScheduleCost::all_full)
      .def("pairs_fraction", &ScheduleCost::pairs_fraction)
      .def("flops_fraction", &ScheduleCost::flops_fraction);

  py::class_<Schedule>(m, "Schedule", "One registered kind per layer (MASFormer's mixed spans).")
      .def(py::init([](py::list layers, const Full& all_full) {
             std::vector<Schedule::Layer> stack;
             for (std::size_t l = 0; l < layers.size(); ++l) {
               stack.push_back(schedule_layer(layers[l], "Schedule: layers[" + std::to_string(l) + "]"));
             }
             return Schedule(std::move(stack), all_full);
           }),
           py::arg("layers"), py::arg("all_full") = Full{})
      .def_static(
          "masformer",
          [](index_t layers, index_t full_layers, py::handle sparse) {
            return Schedule::masformer(layers, full_layers, schedule_layer(sparse, "Schedule.masformer: sparse"));
          },
          py::arg("layers"), py::arg("full_layers"), py::arg("sparse"))
      .def_property_readonly("layers", &Schedule::layers)
      .def_property_readonly("all_full", &Schedule::all_full)
      .def(
          "at", [](const Schedule& s, index_t layer) { return layer_object(s.at(layer)); }, py::arg("layer"))
      .def("__len__", &Schedule::layers)
      .def("__getitem__", [](const Schedule& s, index_t layer) { return layer_object(s.at(layer)); })
      .def("cost", &Schedule::cost, py::arg("shape"));
}

void bind_inspection(py::module_& m) {
  m.def(
      "cost",
      [](py::handle pattern, const AttentionShape& shape) {
        return visit_pattern_arg(pattern_arg(pattern), [&](const auto& p) { return p.cost(shape); });
      },
      py::arg("pattern"), py::arg("shape"), "pattern.cost(shape): attended pairs, FLOP and density of a call.");
  m.def(
      "attended_keys",
      [](py::handle pattern, const AttentionShape& shape, index_t head, index_t row) {
        return visit_pattern_arg(pattern_arg(pattern), [&]<class P>(const P& p) -> index_t {
          if constexpr (kCountsKeys<P>) {
            return attnkit::attended_keys(p, shape, head, row);
          } else {
            detail::reject("attended_keys: pattern", type_name(pattern),
                           "must be a mask kind or a combination of them");
          }
        });
      },
      py::arg("pattern"), py::arg("shape"), py::arg("head"), py::arg("row"),
      "The keys query `row` of query head `head` attends (sum of its mask row).");
  m.def(
      "ascii_view",
      [](py::handle pattern, const AttentionShape& shape, index_t head, index_t max_cells) {
        return visit_pattern_arg(pattern_arg(pattern), [&]<class P>(const P& p) -> std::string {
          if constexpr (MaskedPattern<P>) {
            return attnkit::ascii_view(p, shape, head, max_cells);
          } else {
            detail::reject("ascii_view: pattern", type_name(pattern), "must be a mask kind or a combination of them");
          }
        });
      },
      py::arg("pattern"), py::arg("shape"), py::arg("head") = 0, py::arg("max_cells") = 64,
      "A text picture of the mask: '#' attended, '.' not ('+' some of a cell).");
}

}  // namespace

PatternArg pattern_arg(py::handle object) {
  std::optional<PatternArg> found;
  Kinds::for_each([&]<class P>(std::type_identity<P>, std::size_t) {
    if (!found && py::isinstance<P>(object)) found = PatternArg(dispatch::PatternRef(&object.cast<const P&>()));
  });
  if (found) return *found;
  if (py::isinstance<PyUnion>(object)) return &object.cast<const PyUnion&>().held;
  if (py::isinstance<PyIntersection>(object)) return &object.cast<const PyIntersection&>().held;
  if (py::isinstance<PyPerHead>(object)) return &object.cast<const PyPerHead&>().held;
  detail::reject("pattern", type_name(object), "must be an attnkit pattern (Full, SlidingWindow, ..., Union, PerHead)");
}

void bind_patterns(py::module_& m) {
  bind_shapes(m);
  bind_window_kinds(m);
  bind_block_kinds(m);
  bind_combinations(m);
  bind_schedule(m);
  bind_inspection(m);
}

}  // namespace attnkit::python
