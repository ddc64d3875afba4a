#pragma once
// One attention call decoded from fuzzer bytes: the pattern (any registered kind, pattern/kinds.hpp,
// with its parameters), the shape, where each tensor's elements sit in memory, the values,
// and the options.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "attnkit/core/concepts.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/rng.hpp"
#include "attnkit/core/rpe_bias.hpp"
#include "attnkit/core/score_modifiers.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/pattern/big_bird.hpp"
#include "attnkit/pattern/block_layout.hpp"
#include "attnkit/pattern/block_sparse.hpp"
#include "attnkit/pattern/dilated.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/global.hpp"
#include "attnkit/pattern/kernelized_rpe.hpp"
#include "attnkit/pattern/kinds.hpp"
#include "attnkit/pattern/linformer.hpp"
#include "attnkit/pattern/lsh.hpp"
#include "attnkit/pattern/sliding_window.hpp"
#include "fuzz/byte_reader.hpp"

namespace attnkit::fuzz {

/// Where the elements of a [B, H, L, D] tensor sit in its buffer.
enum class Placement : std::uint8_t {
  kBhld,          ///< contiguous [B, H, L, D]
  kBlhd,          ///< contiguous [B, L, H, D]
  kPaddedRows,    ///< [B, H, L, D + pad]: a gap after every row
  kReversedRows,  ///< [B, H, L, D] with the rows stored last to first (negative seq stride)
  kStridedDim,    ///< hostile: last stride 2 (attention requires 1)
};

/// The values of q, k, v: SPEC.md section 11's sets and harder ones.
enum class Values : std::uint8_t {
  kNormal,    ///< N(0, 1)
  kPeaky,     ///< q scaled by 6
  kOffset,    ///< every logit shifted by +1e4 (q[.., 0] = 1e4 / sigma, k[.., 0] = 1)
  kScaled,    ///< q, k and v scaled by powers of two from 2^-30 to 2^12 (v: 2^-60 to 2^60)
  kZeroRows,  ///< every third row of q and k exactly zero
};

/// A [B, H, L, D] view over a buffer of its own. Cells of the buffer outside the view (the
/// gaps of padded rows, the unused half of a strided last axis) hold the fill value.
template <class T>
struct Buffer {
  Buffer(std::array<index_t, 4> sizes, Placement placement, index_t pad, T fill) {
    std::array<index_t, 4> extent{};
    for (int axis = 0; axis < 4; ++axis) extent[axis] = std::max<index_t>(sizes[axis], 0);
    const index_t unit = placement == Placement::kStridedDim ? 2 : 1;
    const index_t row = extent[kDim] * unit + (placement == Placement::kPaddedRows ? pad : 0);
    std::array<index_t, 4> strides{};
    strides[kDim] = unit;
    if (placement == Placement::kBlhd) {
      strides[kHeads] = row;
      strides[kSeq] = row * extent[kHeads];
      strides[kBatch] = strides[kSeq] * extent[kSeq];
    } else {
      strides[kSeq] = row;
      strides[kHeads] = row * extent[kSeq];
      strides[kBatch] = strides[kHeads] * extent[kHeads];
    }
    storage.assign(static_cast<std::size_t>(strides[kBatch] * extent[kBatch]), fill);
    T* origin = storage.data();
    if (placement == Placement::kReversedRows && !storage.empty()) {
      origin += (extent[kSeq] - 1) * strides[kSeq];
      strides[kSeq] = -strides[kSeq];
    }
    view = TensorView<T>(origin, sizes, strides);
  }
  Buffer(const Buffer& other) : storage(other.storage), view(rebased(other)) {}
  Buffer& operator=(const Buffer&) = delete;

  std::vector<T> storage;
  TensorView<T> view;

  /// Whether each cell of the storage lies inside the view.
  std::vector<bool> inside() const {
    std::vector<bool> cells(storage.size(), false);
    for (index_t b = 0; b < view.batch(); ++b)
      for (index_t h = 0; h < view.heads(); ++h)
        for (index_t l = 0; l < view.seq(); ++l)
          for (index_t d = 0; d < view.dim(); ++d)
            cells[static_cast<std::size_t>(&view(b, h, l, d) - storage.data())] = true;
    return cells;
  }

 private:
  TensorView<T> rebased(const Buffer& other) {
    const auto offset = other.view.data() - other.storage.data();
    return TensorView<T>(storage.data() + offset, other.view.sizes(), other.view.strides());
  }
};

/// Calls are capped at this many (query, key, column) products, B Hq Lq Lk (D + Dv), so that
/// the float64 reference keeps the fuzzer at hundreds of executions per second.
inline constexpr index_t kMaxWork = index_t{1} << 21;

/// A size: usually in [lo, hi]; rarely 0 or -1 (hostile).
inline index_t decode_size(ByteReader& in, index_t lo, index_t hi) {
  if (in.rare()) return in.flag() ? 0 : -1;
  return in.in_range(lo, hi);
}

/// What decoding a call needs to know of its kind beyond the pattern: kinds that attend
/// within one sequence (Lsh, BigBird) usually get Lq = Lk (self_attention), and Lsh also
/// Hq = Hk with its keys shared with the queries (shared_keys).
struct KindHints {
  bool self_attention = false;
  bool shared_keys = false;
};
template <class P>
inline constexpr KindHints kHints{};
template <>
inline constexpr KindHints kHints<BigBird>{.self_attention = true};
template <>
inline constexpr KindHints kHints<Lsh>{.self_attention = true, .shared_keys = true};

/// The call's shape, by the kind's hints; `shared_keys` whether k is q's view.
inline AttentionShape decode_shape(ByteReader& in, const KindHints& hints, bool& shared_keys) {
  AttentionShape s;
  s.batch = decode_size(in, 1, 2);
  s.kv_heads = decode_size(in, 1, 3);
  s.q_heads = s.kv_heads * in.in_range(1, 3);
  if (in.rare()) s.q_heads += 1;  // rarely not a multiple of Hk
  s.q_len = decode_size(in, 1, 140);
  s.kv_len = decode_size(in, 1, 140);
  s.head_dim = decode_size(in, 1, 40);
  s.value_dim = decode_size(in, 1, 40);
  const bool self_attention = hints.self_attention ? !in.rare() : in.byte() < 0x40;
  shared_keys = hints.shared_keys && self_attention;
  if (self_attention) {
    s.kv_len = s.q_len;
    if (hints.shared_keys) s.kv_heads = s.q_heads;
  }
  // Halve the longer length until the call fits kMaxWork (both, when they must stay equal).
  const auto work = [&] {
    return std::max<index_t>(s.batch, 1) * std::max<index_t>(s.q_heads, 1) * std::max<index_t>(s.q_len, 1) *
           std::max<index_t>(s.kv_len, 1) * std::max<index_t>(s.head_dim + s.value_dim, 1);
  };
  while (work() > kMaxWork) {
    if (self_attention || s.q_len == s.kv_len) {
      s.q_len = (s.q_len + 1) / 2;
      s.kv_len = s.q_len;
    } else if (s.q_len > s.kv_len) {
      s.q_len = (s.q_len + 1) / 2;
    } else {
      s.kv_len = (s.kv_len + 1) / 2;
    }
  }
  return s;
}

/// Sorted distinct positions in [0, bound) drawn from `seed` (rarely out of order).
inline std::vector<index_t> decode_tokens(ByteReader& in, index_t bound) {
  const index_t count = in.in_range(0, 6);
  const std::uint64_t seed = in.seed();
  std::vector<index_t> tokens;
  for (index_t t = 0; t < count && bound > 0; ++t) {
    tokens.push_back(uniform_below(counter_random(seed, 0, 0, static_cast<std::uint64_t>(t), 0), bound));
  }
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  if (tokens.size() > 1 && in.rare()) std::swap(tokens.front(), tokens.back());
  return tokens;
}

/// A BlockSparse pattern: block size, one shared layout or one per head (random bits at a
/// decoded density), causal or not; rarely block counts that do not fit the call.
inline BlockSparse decode_block_sparse(ByteReader& in, const AttentionShape& s) {
  const index_t block = in.in_range(1, 48);
  const index_t query_blocks = detail::ceil_div(std::max<index_t>(s.q_len, 0), block) + (in.rare() ? 1 : 0);
  const index_t key_blocks = detail::ceil_div(std::max<index_t>(s.kv_len, 0), block);
  const index_t layouts = in.flag() ? std::max<index_t>(s.q_heads, 1) : 1;
  const std::uint64_t density = in.byte(), seed = in.seed();
  const bool causal = in.flag();
  std::vector<BlockLayout> all;
  for (index_t h = 0; h < layouts; ++h) {
    std::vector<std::uint8_t> bits(static_cast<std::size_t>(std::max<index_t>(query_blocks * key_blocks, 0)));
    for (std::size_t e = 0; e < bits.size(); ++e) {
      bits[e] = (counter_random(seed, 1, static_cast<std::uint64_t>(h), e, 0) & 0xFF) <= density ? 1 : 0;
    }
    all.push_back(BlockLayout::from_bitmap(query_blocks, key_blocks, bits));
  }
  return BlockSparse(block, std::move(all), causal);
}

/// A Linformer pattern: kp, n_max >= Lk (rarely below), one projection or one per kv head,
/// Gaussian or Xavier entries, E = F or not; rarely causal (an error).
inline Linformer decode_linformer(ByteReader& in, const AttentionShape& s) {
  const index_t kp = in.in_range(1, 24);
  const index_t n_max = std::max<index_t>(s.kv_len, 0) + (in.rare() ? -1 : in.in_range(0, 16));
  const index_t heads = in.flag() ? std::max<index_t>(s.kv_heads, 1) : 1;
  const bool xavier = in.flag(), shared = in.flag();
  const std::uint64_t seed = in.seed();
  std::vector<float> e = xavier ? Linformer::xavier_uniform_projection(kp, n_max, heads, seed, 0)
                                : Linformer::gaussian_projection(kp, n_max, heads, seed, 0);
  Linformer lin = shared
                      ? Linformer(kp, n_max, std::move(e))
                      : Linformer(kp, n_max, std::move(e), Linformer::gaussian_projection(kp, n_max, heads, seed, 1));
  lin.causal = in.rare();
  return lin;
}

/// An Lsh pattern: chunk, rounds, buckets (automatic, an even count, even factors, rarely odd),
/// chunks before and after, causal, seed.
inline Lsh decode_lsh(ByteReader& in) {
  Lsh lsh;
  lsh.chunk = in.in_range(1, 40);
  lsh.rounds = in.in_range(1, 4);
  switch (in.in_range(0, 3)) {
    case 0:
      lsh.buckets = 0;
      break;
    case 1:
      lsh.buckets = 2 * in.in_range(1, 8);
      break;
    case 2:
      lsh.buckets = {2, 2 * in.in_range(1, 4)};
      break;
    default:
      lsh.buckets = in.rare() ? 2 * in.in_range(1, 8) + 1 : 2;
  }
  lsh.before = in.in_range(0, 2);
  lsh.after = in.in_range(0, 2);
  lsh.causal = in.flag();
  lsh.seed = in.seed();
  return lsh;
}

/// A KernelizedRpe pattern: features, feature map, orthogonal or not, temperature, seed, a
/// bias (none, shared or per head, values in [-4, 4]), causal, algorithm and FFT engine.
inline KernelizedRpe decode_kernelized_rpe(ByteReader& in, const AttentionShape& s) {
  KernelizedRpe rpe;
  rpe.features = in.in_range(1, 24);
  rpe.map = static_cast<FeatureMap>(in.in_range(0, 2));
  rpe.orthogonal = in.flag();
  rpe.temperature = in.flag() ? 1.0 : 0.5 + 0.25 * static_cast<double>(in.in_range(0, 6));
  rpe.seed = in.seed();
  const index_t tables = in.in_range(0, 2) == 2 ? std::max<index_t>(s.q_heads, 1) : in.in_range(0, 1);
  if (tables > 0) {
    const index_t max_distance = in.in_range(0, std::max<index_t>({s.q_len, s.kv_len, 0}) + 1);
    const std::uint64_t seed = in.seed();
    std::vector<float> values(static_cast<std::size_t>(tables * (2 * max_distance + 1)));
    for (std::size_t e = 0; e < values.size(); ++e) {
      values[e] = static_cast<float>(8.0 * unit_interval(counter_random(seed, 2, 0, e, 0)) - 4.0);
    }
    rpe.bias = RpeBias(max_distance, std::move(values));
  }
  rpe.causal = in.flag();
  rpe.algorithm = static_cast<RpeAlgorithm>(in.in_range(0, 2));
  rpe.fft = static_cast<RpeFft>(in.in_range(0, 2));
  return rpe;
}

/// Each kind's decoder: decode(in, std::type_identity<P>, shape, variant) with the variant
/// in [0, kVariants<P>) (Full: plain or causal). A registered kind without one does not
/// compile (FuzzKinds below).
template <class P>
inline constexpr index_t kVariants = 1;
template <>
inline constexpr index_t kVariants<Full> = 2;

inline Full decode(ByteReader&, std::type_identity<Full>, const AttentionShape&, index_t variant) {
  return Full{.causal = variant == 1};
}
/// Radii in [0, longest + 1]; rarely unbounded or -1 (an error). Causal windows take sinks
/// in [0, longest + 1] half the time; rarely a window looking ahead does (an error).
inline SlidingWindow decode(ByteReader& in, std::type_identity<SlidingWindow>, const AttentionShape& s, index_t) {
  const index_t longest = std::max<index_t>({s.q_len, s.kv_len, 1});
  const auto radius = [&]() -> index_t {
    if (in.rare()) return in.flag() ? SlidingWindow::kUnbounded : -1;
    return in.in_range(0, longest + 1);
  };
  const index_t left = radius();
  const bool causal = in.flag();
  const SlidingWindow window(left, causal ? 0 : radius());
  if ((causal && in.flag()) || in.rare()) return window.with_sinks(in.in_range(0, longest + 1));
  return window;
}
/// Radii up to 8, one dilation in 1..4 per head or one shared; rarely one too many or 0.
inline Dilated decode(ByteReader& in, std::type_identity<Dilated>, const AttentionShape& s, index_t) {
  const index_t left = in.in_range(0, 8), right = in.in_range(0, 8);
  std::vector<index_t> dilations(static_cast<std::size_t>(in.flag() ? std::max<index_t>(s.q_heads, 1) : 1));
  if (in.rare()) dilations.push_back(1);  // one per head plus one: an error
  for (index_t& dilation : dilations) dilation = in.rare() ? 0 : in.in_range(1, 4);
  return Dilated(left, right, std::move(dilations));
}
inline Global decode(ByteReader& in, std::type_identity<Global>, const AttentionShape& s, index_t) {
  const index_t longest = std::max<index_t>({s.q_len, s.kv_len, 1});
  return Global(decode_tokens(in, longest + (in.rare() ? 2 : 0)));
}
inline BlockSparse decode(ByteReader& in, std::type_identity<BlockSparse>, const AttentionShape& s, index_t) {
  return decode_block_sparse(in, s);
}
inline BigBird decode(ByteReader& in, std::type_identity<BigBird>, const AttentionShape&, index_t) {
  const index_t block = in.in_range(1, 40), random_blocks = in.in_range(0, 4);
  return BigBird(block, random_blocks, in.seed());
}
inline Linformer decode(ByteReader& in, std::type_identity<Linformer>, const AttentionShape& s, index_t) {
  return decode_linformer(in, s);
}
inline Lsh decode(ByteReader& in, std::type_identity<Lsh>, const AttentionShape&, index_t) { return decode_lsh(in); }
inline KernelizedRpe decode(ByteReader& in, std::type_identity<KernelizedRpe>, const AttentionShape& s, index_t) {
  return decode_kernelized_rpe(in, s);
}

/// One kind as the fuzzer numbers it: a registered kind (pattern/kinds.hpp) and a variant.
struct FuzzKind {
  std::string name;  // the registered name, "Full causal" for Full's variant 1
  KindHints hints;   // for the shape
  bool key_padding;  // takes Options::key_lengths (KeyPaddedPattern)
  bool modifiable;   // takes score modifiers (Options::softcap, alibi_slopes): the mask kinds
  AnyKind (*decode)(ByteReader& in, const AttentionShape& s, index_t variant);
  index_t variant;
};

/// The fuzzer's kinds: the registry's in its order, each kVariants<P> times (so that the
/// numbers of the committed corpus stay those of Full, Full causal, SlidingWindow, ...).
inline const std::vector<FuzzKind>& fuzz_kinds() {
  static const std::vector<FuzzKind> kinds = [] {
    std::vector<FuzzKind> all;
    Kinds::for_each([&]<class P>(std::type_identity<P>, std::size_t registry_index) {
      for (index_t variant = 0; variant < kVariants<P>; ++variant) {
        std::string name(Kinds::names[registry_index]);
        if constexpr (std::is_same_v<P, Full>) {
          if (variant == 1) name += " causal";
        }
        all.push_back(FuzzKind{name, kHints<P>, KeyPaddedPattern<P>, MaskedPattern<P>,
                               [](ByteReader& in, const AttentionShape& s, index_t v) -> AnyKind {
                                 return decode(in, std::type_identity<P>{}, s, v);
                               },
                               variant});
      }
    });
    return all;
  }();
  return kinds;
}

/// A placement and the pad of padded rows; rarely a last stride of 2.
inline Placement decode_placement(ByteReader& in, index_t& pad) {
  pad = in.in_range(1, 3);
  if (in.rare()) return Placement::kStridedDim;
  return static_cast<Placement>(in.in_range(0, 3));
}

/// Options: scale (unset, 1, 0, 1/4 or 3; rarely NaN or infinite), threads (0 to 3; rarely -1),
/// key lengths (for Linformer usually, each in [0, Lk]; rarely for others or out of range) and,
/// for the mask kinds only (the others draw no bytes for them, so the committed inputs of those
/// kinds decode as before), score modifiers: softcap off, 1/2, 4 or 30 (rarely -1 or NaN),
/// ALiBi's standard slopes or 16 times steeper (rarely one slope too many).
inline Options decode_options(ByteReader& in, const FuzzKind& kind, const AttentionShape& s) {
  Options options;
  switch (in.in_range(0, 5)) {
    case 0:
      break;
    case 1:
      options.scale = 1.0;
      break;
    case 2:
      options.scale = 0.0;
      break;
    case 3:
      options.scale = 0.25;
      break;
    case 4:
      options.scale = 3.0;
      break;
    default:
      if (in.rare())
        options.scale = in.flag() ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  }
  options.threads = in.rare() ? -1 : static_cast<int>(in.in_range(0, 3));
  if (kind.modifiable) {
    constexpr double kCaps[] = {0.0, 0.5, 4.0, 30.0};
    options.softcap = kCaps[in.in_range(0, 3)];
    if (in.rare()) options.softcap = in.flag() ? -1.0 : std::numeric_limits<double>::quiet_NaN();
    if (in.flag() && s.q_heads > 0) {
      options.alibi_slopes = alibi_slopes(s.q_heads);
      if (in.flag())
        for (double& slope : options.alibi_slopes) slope *= 16;
      if (in.rare()) options.alibi_slopes.push_back(0.5);
    }
  }
  if ((kind.key_padding && in.flag()) || in.rare()) {
    for (index_t b = 0; b < std::max<index_t>(s.batch, 0) + (in.rare() ? 1 : 0); ++b) {
      options.key_lengths.push_back(in.rare() ? std::max<index_t>(s.kv_len, 0) + 1
                                              : in.in_range(0, std::max<index_t>(s.kv_len, 0)));
    }
  }
  return options;
}

/// Fills a tensor view with N(0, 1) values times `scale`, keyed by (seed, stream, element).
template <class T>
void fill_normal(const TensorView<T>& x, std::uint64_t seed, std::uint64_t stream, double scale) {
  std::uint64_t index = 0;
  for (index_t b = 0; b < x.batch(); ++b)
    for (index_t h = 0; h < x.heads(); ++h)
      for (index_t l = 0; l < x.seq(); ++l)
        for (index_t d = 0; d < x.dim(); ++d)
          x(b, h, l, d) = store_as<T>(scale * normal_from_counter(seed, stream, 0, index++));
}

/// Writes `set`'s values into q, k (the same view when keys are shared) and v, rounded to T.
/// float16 holds magnitudes up to 65504 only: its scaled sets stay within 2^-14 ... 2^12 (so
/// N(0, 1) samples stay finite) and its +1e4 offset query at most 6e4.
template <class T>
void fill_values(ByteReader& in, Values set, const TensorView<T>& q, const TensorView<T>& k, const TensorView<T>& v,
                 double sigma) {
  constexpr bool kNarrowRange = std::is_same_v<T, float16>;
  const std::uint64_t seed = in.seed();
  double q_scale = set == Values::kPeaky ? 6.0 : 1.0, k_scale = 1.0, v_scale = 1.0;
  if (set == Values::kScaled) {
    const auto exponent = [&](index_t lo, index_t hi) {
      const index_t e = in.in_range(lo, hi);
      return static_cast<int>(kNarrowRange ? std::clamp<index_t>(e, -14, 12) : e);
    };
    q_scale = std::ldexp(1.0, exponent(-30, 12));
    k_scale = std::ldexp(1.0, exponent(-30, 12));
    v_scale = std::ldexp(1.0, exponent(-60, 60));
  }
  const double offset = kNarrowRange ? std::min(1e4 / sigma, 6e4) : 1e4 / sigma;
  fill_normal(q, seed, 1, q_scale);
  if (k.data() != q.data()) fill_normal(k, seed, 2, k_scale);
  fill_normal(v, seed, 3, v_scale);
  for (const TensorView<T>& x : {q, k}) {
    if (x.dim() < 1) continue;
    for (index_t b = 0; b < x.batch(); ++b)
      for (index_t h = 0; h < x.heads(); ++h)
        for (index_t l = 0; l < x.seq(); ++l) {
          if (set == Values::kZeroRows && l % 3 == 0) std::fill_n(&x(b, h, l, 0), x.dim(), store_as<T>(0.0));
          if (set == Values::kOffset && k.data() != q.data()) {
            x(b, h, l, 0) = store_as<T>(x.data() == q.data() ? offset : 1.0);
          }
        }
  }
}

/// Overwrites key row j of kv head h in batch element b of k and v with NaN or infinity:
/// a row no query attends, which must not reach any output (SPEC.md section 0).
template <class T>
void poison_row(const TensorView<T>& k, const TensorView<T>& v, index_t b, index_t h, index_t j) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const T bad = store_as<T>(j % 3 == 0 ? std::numeric_limits<double>::quiet_NaN() : (j % 3 == 1 ? kInf : -kInf));
  std::fill_n(&k(b, h, j, 0), k.dim(), bad);
  std::fill_n(&v(b, h, j, 0), v.dim(), bad);
}

/// Poisons every key row the call does not read: for mask kinds, the rows no query of any
/// head of the kv head's group attends (from the pattern's closed-form mask); for Linformer,
/// the padded rows j >= key_lengths[b]. Nothing when the call is invalid (it must throw).
template <class T>
void poison_unread_keys(const AnyKind& layer, const AttentionShape& s, const Options& options, const TensorView<T>& k,
                        const TensorView<T>& v) {
  if (s.batch < 1 || s.kv_heads < 1 || s.q_heads < 1 || s.q_heads % s.kv_heads != 0 || s.head_dim < 1 ||
      s.value_dim < 1 || s.q_len < 0 || s.kv_len < 0 || k.stride(kDim) != 1 || v.stride(kDim) != 1) {
    return;
  }
  std::visit(
      [&](const auto& pattern) {
        using P = std::decay_t<decltype(pattern)>;
        if constexpr (MaskedPattern<P>) {
          if (!options.key_lengths.empty()) return;
          try {
            const auto mask = pattern.mask(s);
            for (index_t h = 0; h < s.kv_heads; ++h)
              for (index_t j = 0; j < s.kv_len; ++j) {
                bool read = false;
                for (index_t g = h * s.group_size(); g < (h + 1) * s.group_size() && !read; ++g)
                  for (index_t i = 0; i < s.q_len && !read; ++i) read = mask.multiplicity(g, i, j) > 0;
                if (!read)
                  for (index_t b = 0; b < s.batch; ++b) poison_row(k, v, b, h, j);
              }
          } catch (const attnkit::invalid_argument&) {
          }
        } else if constexpr (std::is_same_v<P, Linformer>) {
          if (static_cast<index_t>(options.key_lengths.size()) != s.batch) return;
          for (index_t b = 0; b < s.batch; ++b) {
            const index_t valid = options.key_lengths[static_cast<std::size_t>(b)];
            if (valid < 0 || valid > s.kv_len) return;
            for (index_t h = 0; h < s.kv_heads; ++h)
              for (index_t j = valid; j < s.kv_len; ++j) poison_row(k, v, b, h, j);
          }
        }
      },
      layer);
}

}  // namespace attnkit::fuzz
