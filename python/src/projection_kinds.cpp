// The kinds that hold learned or drawn parameters: Linformer (projections E, F), Lsh (hash
// rotations) and KernelizedRpe (random features, RpeBias), with their inspection helpers
// (Linformer.project, Lsh.hash, Lsh.rotation, KernelizedRpe.feature_matrix).

#include <sstream>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "attnkit/pattern/kernelized_rpe.hpp"
#include "attnkit/pattern/linformer.hpp"
#include "attnkit/pattern/lsh.hpp"
#include "bindings.hpp"
#include "patterns.hpp"
#include "tensor_arg.hpp"

namespace attnkit::python {

namespace {

/// A float table given as any array-like (copied: patterns own their parameters).
std::vector<float> float_values(py::handle object, std::string_view name) {
  const auto array = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(object);
  if (!array)
    detail::reject(name, std::string(py::str(py::type::handle_of(object))), "must be an array-like of floats");
  return std::vector<float>(array.data(), array.data() + array.size());
}

template <class T>
py::array_t<T> numpy_copy(const std::vector<T>& values, std::vector<py::ssize_t> shape) {
  py::array_t<T> result(shape);
  std::copy(values.begin(), values.end(), result.mutable_data());
  return result;
}

Options call_options(int threads) {
  Options options;
  options.threads = threads;
  return options;
}

py::tuple linformer_project(const Linformer& pattern, py::handle k_object, py::handle v_object, int threads) {
  const TensorArg k = tensor_arg(k_object, "k"), v = tensor_arg(v_object, "v");
  k.require_dims(4, "[B, Hk, Lk, D]");
  v.require_dims(4, "[B, Hk, Lk, Dv]");
  v.require_dtype(k.dtype, "must equal k.dtype = " + std::string(dtype_name(k.dtype)));
  if (k.dtype != DType::kFloat32 && k.dtype != DType::kFloat64) {
    detail::reject("k.dtype", dtype_name(k.dtype),
                   "Linformer.project takes float32 or float64 (attention takes halves)");
  }
  py::object keys = allocate(k.library, k.dtype, {k.sizes[0], k.sizes[1], pattern.kp(), k.sizes[3]});
  py::object values = allocate(k.library, k.dtype, {k.sizes[0], k.sizes[1], pattern.kp(), v.sizes[3]});
  const TensorArg keys_out = tensor_arg(keys, "keys_out"), values_out = tensor_arg(values, "values_out");
  const auto run = [&]<class T>(std::type_identity<T>) {
    py::gil_scoped_release unlocked;
    pattern.project<T>(k.view<const T>(), v.view<const T>(), keys_out.view<T>(), values_out.view<T>(),
                       call_options(threads));
  };
  if (k.dtype == DType::kFloat32) {
    run(std::type_identity<float>{});
  } else {
    run(std::type_identity<double>{});
  }
  return py::make_tuple(keys, values);
}

py::array_t<std::int32_t> lsh_hash(const Lsh& pattern, py::handle x_object, int threads) {
  const TensorArg x = tensor_arg(x_object, "x");
  x.require_dims(4, "[B, H, n, D]");
  const auto hash = [&]<class T>(std::type_identity<T>) {
    LshBucketIds ids(0, 0, 0, 0, 0);
    {
      py::gil_scoped_release unlocked;
      ids = pattern.hash<T>(x.view<const T>(), call_options(threads));
    }
    py::array_t<std::int32_t> result({ids.batch(), ids.heads(), ids.rounds(), ids.seq_len()});
    std::int32_t* target = result.mutable_data();
    for (index_t b = 0; b < ids.batch(); ++b) {
      for (index_t h = 0; h < ids.heads(); ++h) {
        const std::int32_t* row = ids.of(b, h);
        target = std::copy(row, row + ids.rounds() * ids.seq_len(), target);
      }
    }
    return result;
  };
  py::array_t<std::int32_t> result;
  with_dtype<float, double, bfloat16, float16>(x.dtype, "x", "must be float32, float64, bfloat16 or float16",
                                               [&](auto type) { result = hash(type); });
  return result;
}

LshBuckets lsh_buckets(py::handle buckets) {
  if (py::isinstance<py::int_>(buckets)) return LshBuckets(buckets.cast<index_t>());
  const std::vector<index_t> factors = index_list(buckets, "Lsh: buckets");
  if (factors.size() == 1) return LshBuckets(factors[0]);
  if (factors.size() == 2) return LshBuckets({factors[0], factors[1]});
  std::ostringstream text;
  text << factors.size();
  detail::reject("Lsh: len(buckets)", text.str(), "must be 1 or 2 (a count, or two factors as HF's num_buckets)");
}

void bind_linformer(py::module_& m) {
  py::class_<Linformer> linformer(m, "Linformer", "Linformer: K' = E K, V' = F V along the sequence, then softmax.");
  linformer
      .def(py::init([](index_t kp, index_t n_max, py::handle e, py::handle f) {
             std::vector<float> e_values = float_values(e, "Linformer: e");
             if (f.is_none()) return Linformer(kp, n_max, std::move(e_values));
             return Linformer(kp, n_max, std::move(e_values), float_values(f, "Linformer: f"));
           }),
           py::arg("kp"), py::arg("n_max"), py::arg("e"), py::arg("f") = py::none(),
           "e, f: [P, kp, n_max] floats, P = 1 (shared) or Hk; f omitted: one shared matrix")
      .def_static("gaussian", &Linformer::gaussian, py::arg("kp"), py::arg("n_max"), py::arg("heads"), py::arg("seed"))
      .def_static("xavier_uniform", &Linformer::xavier_uniform, py::arg("kp"), py::arg("n_max"), py::arg("heads"),
                  py::arg("seed"))
      .def_static(
          "gaussian_projection",
          [](index_t kp, index_t n_max, index_t heads, std::uint64_t seed, std::uint64_t stream) {
            return numpy_copy(Linformer::gaussian_projection(kp, n_max, heads, seed, stream), {heads, kp, n_max});
          },
          py::arg("kp"), py::arg("n_max"), py::arg("heads"), py::arg("seed"), py::arg("stream") = 0)
      .def_static(
          "xavier_uniform_projection",
          [](index_t kp, index_t n_max, index_t heads, std::uint64_t seed, std::uint64_t stream) {
            return numpy_copy(Linformer::xavier_uniform_projection(kp, n_max, heads, seed, stream), {heads, kp, n_max});
          },
          py::arg("kp"), py::arg("n_max"), py::arg("heads"), py::arg("seed"), py::arg("stream") = 0)
      .def_property_readonly("kp", &Linformer::kp)
      .def_property_readonly("n_max", &Linformer::n_max)
      .def_property_readonly("shares_key_value_projection", &Linformer::shares_key_value_projection)
      .def("project", &linformer_project, py::arg("k"), py::arg("v"), py::kw_only(), py::arg("threads") = 0,
           "(E K [B, Hk, kp, D], F V [B, Hk, kp, Dv]) for float32 or float64 k, v")
      .def("__repr__",
           [](const Linformer& p) {
             return "Linformer(kp=" + std::to_string(p.kp()) + ", n_max=" + std::to_string(p.n_max()) + ")";
           })
      .def(
          "cost", [](const Linformer& p, const AttentionShape& s) { return p.cost(s); }, py::arg("shape"));
}

void bind_lsh(py::module_& m) {
  py::class_<Lsh> lsh(m, "Lsh", "Reformer's shared-QK LSH attention: attention(lsh, x, x, v).");
  lsh.def(
         py::init([](index_t chunk, index_t rounds, py::handle buckets, index_t before, index_t after, bool causal,
                     std::uint64_t seed, std::uint64_t layer, index_t max_positions, py::handle rotations,
                     double key_epsilon) {
           Lsh p;
           p.chunk = chunk;
           p.rounds = rounds;
           p.buckets = lsh_buckets(buckets);
           p.before = before;
           p.after = after;
           p.causal = causal;
           p.seed = seed;
           p.layer = layer;
           p.max_positions = max_positions;
           if (!rotations.is_none()) p.rotations = float_values(rotations, "Lsh: rotations");
           p.key_epsilon = key_epsilon;
           return p;
         }),
         py::kw_only(), py::arg("chunk") = 64, py::arg("rounds") = 1, py::arg("buckets") = 0, py::arg("before") = 1,
         py::arg("after") = 0, py::arg("causal") = false, py::arg("seed") = 0, py::arg("layer") = 0,
         py::arg("max_positions") = 0, py::arg("rotations") = py::none(), py::arg("key_epsilon") = 0.0,
         "buckets: 0 (HF's automatic rule), a count, or [f1, f2]; rotations: HF's random_rotations [H, D, R, columns]; "
         "key_epsilon: keys x / sqrt(|x|^2 + D key_epsilon), 1e-6 for HF/trax checkpoints (with scale=1)")
      .def_readonly("chunk", &Lsh::chunk)
      .def_readonly("rounds", &Lsh::rounds)
      .def_readonly("before", &Lsh::before)
      .def_readonly("after", &Lsh::after)
      .def_readonly("causal", &Lsh::causal)
      .def_readonly("seed", &Lsh::seed)
      .def_readonly("layer", &Lsh::layer)
      .def_readonly("max_positions", &Lsh::max_positions)
      .def_readonly("key_epsilon", &Lsh::key_epsilon)
      .def("bucket_factors", &Lsh::bucket_factors, py::arg("n"))
      .def(
          "rotation",
          [](const Lsh& p, index_t head, index_t dim, index_t n) {
            const index_t columns = p.bucket_layout(n).columns;
            return numpy_copy(p.rotation(head, dim, n), {dim, p.rounds, columns});
          },
          py::arg("head"), py::arg("dim"), py::arg("n"), "Head h's rotation [D, R, columns] float32")
      .def("hash", &lsh_hash, py::arg("x"), py::kw_only(), py::arg("threads") = 0,
           "Bucket ids [B, H, R, n] int32 of every row and round of x [B, H, n, D]")
      .def("__repr__",
           [](const Lsh& p) {
             return "Lsh(chunk=" + std::to_string(p.chunk) + ", rounds=" + std::to_string(p.rounds) +
                    ", causal=" + (p.causal ? "True" : "False") + ")";
           })
      .def(
          "cost", [](const Lsh& p, const AttentionShape& s) { return p.cost(s); }, py::arg("shape"));
}

void bind_kernelized_rpe(py::module_& m) {
  py::enum_<FeatureMap>(m, "FeatureMap")
      .value("positive", FeatureMap::kPositive)
      .value("trigonometric", FeatureMap::kTrigonometric)
      .value("normalized_positive", FeatureMap::kNormalizedPositive);
  py::enum_<RpeAlgorithm>(m, "RpeAlgorithm")
      .value("auto", RpeAlgorithm::kAuto)
      .value("fft", RpeAlgorithm::kFft)
      .value("direct", RpeAlgorithm::kDirect);
  py::enum_<RpeFft>(m, "RpeFft")
      .value("lanes", RpeFft::kLanes)
      .value("eigen", RpeFft::kEigen)
      .value("fftw", RpeFft::kFftw);

  py::class_<RpeBias>(m, "RpeBias", "Relative-position bias b_t, t in [-max_distance, max_distance], clipped beyond.")
      .def(py::init([](index_t max_distance, py::handle values) {
             return RpeBias(max_distance, float_values(values, "RpeBias: values"));
           }),
           py::arg("max_distance"), py::arg("values"), "values: [P, 2 max_distance + 1] floats, P = 1 or Hq")
      .def(py::init<>())
      .def_property_readonly("max_distance", &RpeBias::max_distance)
      .def_property_readonly("heads", &RpeBias::heads)
      .def_property_readonly("empty", &RpeBias::empty);

  py::class_<KernelizedRpe> rpe(m, "KernelizedRpe",
                                "Kernelized attention with a relative-position bias (Luo et al. 2021), O(n log n).");
  rpe.def(py::init([](index_t features, FeatureMap map, bool orthogonal, double temperature, std::uint64_t seed,
                      std::uint64_t layer, const RpeBias& bias, bool causal, RpeAlgorithm algorithm, RpeFft fft) {
            return KernelizedRpe{features, map, orthogonal, temperature, seed, layer, bias, causal, algorithm, fft};
          }),
          py::kw_only(), py::arg("features") = 64, py::arg("map") = FeatureMap::kPositive,
          py::arg("orthogonal") = false, py::arg("temperature") = 1.0, py::arg("seed") = 0, py::arg("layer") = 0,
          py::arg("bias") = RpeBias{}, py::arg("causal") = false, py::arg("algorithm") = RpeAlgorithm::kAuto,
          py::arg("fft") = RpeFft::kLanes)
      .def_readonly("features", &KernelizedRpe::features)
      .def_readonly("map", &KernelizedRpe::map)
      .def_readonly("orthogonal", &KernelizedRpe::orthogonal)
      .def_readonly("temperature", &KernelizedRpe::temperature)
      .def_readonly("seed", &KernelizedRpe::seed)
      .def_readonly("layer", &KernelizedRpe::layer)
      .def_readonly("bias", &KernelizedRpe::bias)
      .def_readonly("causal", &KernelizedRpe::causal)
      .def_readonly("algorithm", &KernelizedRpe::algorithm)
      .def_readonly("fft", &KernelizedRpe::fft)
      .def(
          "feature_matrix",
          [](const KernelizedRpe& p, index_t head, index_t dim) {
            return numpy_copy(p.feature_matrix(head, dim), {p.features, dim});
          },
          py::arg("head"), py::arg("dim"), "W of query head `head`: [features, dim] float64")
      .def("__repr__",
           [](const KernelizedRpe& p) {
             return "KernelizedRpe(features=" + std::to_string(p.features) +
                    ", causal=" + (p.causal ? "True" : "False") + ")";
           })
      .def(
          "cost", [](const KernelizedRpe& p, const AttentionShape& s) { return p.cost(s); }, py::arg("shape"));
}

}  // namespace

void bind_projection_kinds(py::module_& m) {
  bind_linformer(m);
  bind_lsh(m);
  bind_kernelized_rpe(m);
}

}  // namespace attnkit::python
