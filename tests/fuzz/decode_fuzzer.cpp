// libFuzzer harness of attention over KV caches (SPEC.md section 13; README "Fuzzing"). Each
// input decodes to a cache (float, bfloat16, float16 or 8-bit blocks; contiguous or paged with
// a shuffled block table, sometimes a page shared by two sequences; ragged lengths, some 0),
// filled through attnkit::append (the same rows for every sequence, or one ragged append of
// each sequence's own count), a pattern (any registered kind, StreamingLLM's sinks plus window,
// or a causal window with global tokens), score modifiers (softcap, ALiBi) and queries (float,
// bfloat16 or float16; out in their type or float; the 8-bit query mode, over 8-bit caches). The call must
// either throw attnkit::invalid_argument with out and lse untouched (always, for a kind that
// cannot decode), or give no NaN, match reference::attention over the same cache within SPEC.md
// section 11's tolerance, and give the same bits on one thread. Every slot past a sequence's
// length, the spare page and the block table's unused entries hold NaN or garbage ids.
// Each of these checks is a `require` (fuzz/fuzz_checks.hpp): a failed one prints the rule and
// the case and aborts, which libFuzzer reports as a crash with the input that caused it.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "attnkit/cache/append.hpp"
#include "attnkit/cache/kv_cache.hpp"
#include "attnkit/core/concepts.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/half.hpp"
#include "attnkit/core/q8_block.hpp"
#include "attnkit/core/score_modifiers.hpp"
#include "attnkit/decode.hpp"
#include "attnkit/pattern/kinds.hpp"
#include "attnkit/pattern/union.hpp"
#include "attnkit/reference/decode.hpp"
#include "fuzz/byte_reader.hpp"
#include "fuzz/fuzz_case.hpp"
#include "fuzz/fuzz_checks.hpp"
#include "support/accuracy.hpp"
#include "support/test_data.hpp"

namespace attnkit::fuzz {
namespace {

/// Everything of a case but the element types.
struct DecodeCase {
  index_t batch = 1, kv_heads = 1, q_heads = 1, capacity = 1, head_dim = 1, value_dim = 1, q_len = 1;
  bool paged = false, share_first_page = false;
  bool ragged_append = false;  // the cache filled by one append with a count per sequence
  index_t page_size = 1;
  std::vector<index_t> lengths;
  Options options;
  bool with_lse = false;
  std::uint64_t seed = 0;
  std::string text;  // for failure reports
};

/// A cache of element type E over storage of its own, filled by append from N(0, 1) rows.
template <class E>
struct FuzzCache {
  explicit FuzzCache(const DecodeCase& c)
      : pages_per_sequence(c.paged ? (c.capacity + c.page_size - 1) / c.page_size : 0),
        pages(c.paged ? c.batch * pages_per_sequence + 1 : 0),
        lengths(static_cast<std::size_t>(c.batch), 0) {
    const index_t slots = c.paged ? pages * c.page_size : c.batch * c.capacity;
    k.resize(static_cast<std::size_t>(slots * c.kv_heads * c.head_dim / kValuesPerElement<E>));
    v.resize(static_cast<std::size_t>(slots * c.kv_heads * c.value_dim / kValuesPerElement<E>));
    poison(k.data(), k.size());
    poison(v.data(), v.size());
    if (c.paged) {
      // A shuffle of the page ids (the last page stays spare); sequence 1 may share page 0 of
      // sequence 0. Entries past a sequence's pages hold ids far out of range.
      std::vector<std::int32_t> order(static_cast<std::size_t>(pages - 1));
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
      for (std::size_t i = order.size(); i > 1; --i)
        std::swap(order[i - 1], order[counter_random(c.seed, 7, 0, i, 0) % i]);
      table = order;
      if (c.share_first_page && c.batch > 1) table[static_cast<std::size_t>(pages_per_sequence)] = table[0];
      for (index_t b = 0; b < c.batch; ++b) {
        const index_t used = (c.lengths[static_cast<std::size_t>(b)] + c.page_size - 1) / c.page_size;
        for (index_t p = used; p < pages_per_sequence; ++p)
          table[static_cast<std::size_t>(b * pages_per_sequence + p)] = std::int32_t{1} << 30;
      }
    }
    // Append every sequence's first max-length rows in one call (pages of all used tokens
    // mapped), then set the real lengths: slots past them were written but are poisoned again.
    index_t longest = 0;
    for (index_t length : c.lengths) longest = std::max(longest, std::min(length, c.capacity));
    if (longest > 0) {
      std::vector<float> k_rows(static_cast<std::size_t>(c.batch * c.kv_heads * longest * c.head_dim));
      std::vector<float> v_rows(static_cast<std::size_t>(c.batch * c.kv_heads * longest * c.value_dim));
      for (std::size_t i = 0; i < k_rows.size(); ++i)
        k_rows[i] = static_cast<float>(testing::normal_sample(c.seed, 1, i));
      for (std::size_t i = 0; i < v_rows.size(); ++i)
        v_rows[i] = static_cast<float>(testing::normal_sample(c.seed, 2, i));
      std::vector<index_t> start(static_cast<std::size_t>(c.batch), 0);
      std::vector<std::int32_t> fill_table = table;
      for (index_t b = 0; b < c.batch && c.paged; ++b)  // map every page the fill touches
        for (index_t p = 0; p < (longest + c.page_size - 1) / c.page_size; ++p) {
          std::int32_t& id = fill_table[static_cast<std::size_t>(b * pages_per_sequence + p)];
          if (id >= pages) id = static_cast<std::int32_t>(pages - 1);  // the spare page
        }
      const auto k_new = bhld(static_cast<const float*>(k_rows.data()), c.batch, c.kv_heads, longest, c.head_dim);
      const auto v_new = bhld(static_cast<const float*>(v_rows.data()), c.batch, c.kv_heads, longest, c.value_dim);
      // Either every sequence takes `longest` rows, or (ragged) each its own length's worth,
      // the slots past it never written (still poisoned).
      std::vector<index_t> counts;
      for (index_t length : c.lengths) counts.push_back(std::min(length, c.capacity));
      const auto fill = [&](const auto& cache) {
        if (c.ragged_append) {
          append(cache, k_new, v_new, std::span<const index_t>(counts));
        } else {
          append(cache, k_new, v_new);
        }
      };
      if (c.paged) {
        fill(paged_view(c, fill_table.data(), start));
      } else {
        fill(contiguous(c, start));
      }
      largest_key = largest_row(k_rows, c.head_dim) * 1.01;  // the cache's rounding: below 1% (8-bit)
      largest_value = 0;
      for (float x : v_rows) largest_value = std::max(largest_value, std::abs(static_cast<double>(x)) * 1.01);
      // Re-poison the slots past each sequence's length (not those of a shared page that the
      // other sequence still holds).
      for (index_t b = 0; b < c.batch && !c.ragged_append; ++b)
        for (index_t t = c.lengths[static_cast<std::size_t>(b)]; t < longest; ++t) {
          if (c.paged && c.share_first_page && t < c.page_size && b <= 1) continue;
          for (index_t h = 0; h < c.kv_heads; ++h) {
            const index_t page =
                c.paged ? fill_table[static_cast<std::size_t>(b * pages_per_sequence + t / c.page_size)] : b;
            const index_t slot = c.paged ? t % c.page_size : t;
            const index_t rows_per_page = c.paged ? c.page_size : c.capacity;
            const auto at = [&](index_t dim) {
              return ((page * c.kv_heads + h) * rows_per_page + slot) * (dim / kValuesPerElement<E>);
            };
            poison(k.data() + at(c.head_dim), static_cast<std::size_t>(c.head_dim / kValuesPerElement<E>));
            poison(v.data() + at(c.value_dim), static_cast<std::size_t>(c.value_dim / kValuesPerElement<E>));
          }
        }
    }
    lengths = c.lengths;
  }

  static double largest_row(const std::vector<float>& rows, index_t dim) {
    double largest = 0;
    for (std::size_t r = 0; r * static_cast<std::size_t>(dim) < rows.size(); ++r) {
      double sum = 0;
      for (index_t d = 0; d < dim; ++d)
        sum += rows[r * static_cast<std::size_t>(dim) + static_cast<std::size_t>(d)] *
               static_cast<double>(rows[r * static_cast<std::size_t>(dim) + static_cast<std::size_t>(d)]);
      largest = std::max(largest, std::sqrt(sum));
    }
    return largest;
  }
  static void poison(E* x, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      if constexpr (std::is_same_v<E, q8_0_block>) {
        x[i] = q8_0_block{};
        x[i].scale = to_float16(std::numeric_limits<float>::quiet_NaN());
      } else {
        x[i] = store_as<E>(std::numeric_limits<double>::quiet_NaN());
      }
    }
  }

  KvCache<E> contiguous(const DecodeCase& c, std::vector<index_t>& with_lengths) {
    return KvCache<E>{bhld(k.data(), c.batch, c.kv_heads, c.capacity, c.head_dim / kValuesPerElement<E>),
                      bhld(v.data(), c.batch, c.kv_heads, c.capacity, c.value_dim / kValuesPerElement<E>),
                      with_lengths};
  }
  PagedKvCache<E> paged_view(const DecodeCase& c, const std::int32_t* block_table, std::vector<index_t>& with_lengths) {
    return PagedKvCache<E>{bhld(k.data(), pages, c.kv_heads, c.page_size, c.head_dim / kValuesPerElement<E>),
                           bhld(v.data(), pages, c.kv_heads, c.page_size, c.value_dim / kValuesPerElement<E>),
                           PageTable{block_table, c.batch, pages_per_sequence, pages_per_sequence}, with_lengths};
  }

  index_t pages_per_sequence, pages;
  std::vector<E> k, v;
  std::vector<std::int32_t> table;
  std::vector<index_t> lengths;
  double largest_key = 0, largest_value = 0;
};

/// Two vectors' bytes, equal (empty ones too).
template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// attnkit::attention over the cache; true when it threw attnkit::invalid_argument.
template <class P, class Cache, class Q, class Out>
bool rejects(const P& pattern, const TensorView<const Q>& q, const Cache& cache, const TensorView<Out>& out,
             TensorView<float>* lse, const Options& options) {
  try {
    if (lse != nullptr) {
      attention(pattern, q, cache, out, *lse, options);
    } else {
      attention(pattern, q, cache, out, options);
    }
  } catch (const attnkit::invalid_argument&) {
    return true;
  }
  return false;
}

/// One case with cache elements E, queries Q and out Out.
template <class E, class Q, class Out, class P>
void run_case(const DecodeCase& c, const P& pattern, bool decodable) {
  FuzzCache<E> cache(c);
  const auto with_cache = [&](auto&& f) {
    if (c.paged) {
      f(cache.paged_view(c, cache.table.data(), cache.lengths));
    } else {
      f(cache.contiguous(c, cache.lengths));
    }
  };
  std::vector<Q> q(static_cast<std::size_t>(c.batch * c.q_heads * c.q_len * c.head_dim));
  double largest_query = 0;
  for (std::size_t i = 0; i < q.size(); ++i) {
    q[i] = store_as<Q>(testing::normal_sample(c.seed, 3, i) * (1 + static_cast<double>(c.seed % 4)));
    largest_query = std::max(largest_query, std::abs(static_cast<double>(widen(q[i]))));
  }
  largest_query *= std::sqrt(static_cast<double>(c.head_dim));
  const TensorView<const Q> qv = bhld(static_cast<const Q*>(q.data()), c.batch, c.q_heads, c.q_len, c.head_dim);
  std::vector<Out> out(static_cast<std::size_t>(c.batch * c.q_heads * c.q_len * c.value_dim), poison_value<Out>());
  std::vector<float> lse(static_cast<std::size_t>(c.batch * c.q_heads * c.q_len), poison_value<float>());
  const std::vector<Out> out_before = out;
  const std::vector<float> lse_before = lse;
  const TensorView<Out> ov = bhld(out.data(), c.batch, c.q_heads, c.q_len, c.value_dim);
  TensorView<float> lv = lse_view(lse.data(), c.batch, c.q_heads, c.q_len);

  bool rejected = false;
  with_cache(
      [&](const auto& view) { rejected = rejects(pattern, qv, view, ov, c.with_lse ? &lv : nullptr, c.options); });
  if (rejected) {
    require(same_bytes(out, out_before), "threw attnkit::invalid_argument after writing to out", c.text);
    require(same_bytes(lse, lse_before), "threw attnkit::invalid_argument after writing to lse", c.text);
    return;
  }
  require(decodable, "a kind that cannot decode was accepted", c.text);
  require(!has_nan(ov), "NaN in out", c.text);
  require(!c.with_lse || !has_nan(lv), "NaN in lse", c.text);

  // The reference, for the pattern or the kind a variant holds.
  std::vector<double> ref(out.size()), ref_lse(lse.size());
  TensorView<double> ref_lse_view = lse_view(ref_lse.data(), c.batch, c.q_heads, c.q_len);
  visit_pattern(pattern, [&](const auto& held) {
    if constexpr (DecodablePattern<std::remove_cvref_t<decltype(held)>>) {
      with_cache([&](const auto& view) {
        reference::attention(held, qv, view, bhld(ref.data(), c.batch, c.q_heads, c.q_len, c.value_dim), ref_lse_view,
                             c.options);
      });
    }
  });
  std::vector<double> got(out.size()), got_lse(lse.size());
  for (std::size_t i = 0; i < out.size(); ++i) got[i] = static_cast<double>(widen(out[i]));
  for (std::size_t i = 0; i < lse.size(); ++i) got_lse[i] = lse[i];
  const double sigma = c.options.scale.value_or(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  // Score modifiers round at the size of the cap (a few ulp of a tanh) and of ALiBi's penalty.
  double penalty = 0;
  for (double slope : c.options.alibi_slopes) penalty = std::max(penalty, std::abs(slope));
  const double modified = 4 * c.options.softcap + penalty * static_cast<double>(c.capacity);
  SoftmaxTolerance tolerance = softmax_tolerance<float>(std::max(cache.largest_value, 1e-300),
                                                        std::abs(sigma) * largest_query * cache.largest_key + modified,
                                                        static_cast<double>(c.head_dim), 0.0);
  tolerance.out.rtol += testing::output_rounding<Out>();
  tolerance.out.atol += testing::output_subnormal_rounding<Out>();
  const auto view = [&](const std::vector<double>& x, index_t dim) {
    return bhld(x.data(), c.batch, c.q_heads, c.q_len, dim);
  };
  const auto close = testing::all_close<double>(view(got, c.value_dim), view(ref, c.value_dim), tolerance.out);
  require(static_cast<bool>(close), std::string("out differs from the reference ") + close.message(), c.text);
  if (c.with_lse) {
    const auto lse_close = testing::all_close<double>(view(got_lse, 1), view(ref_lse, 1), tolerance.lse);
    require(static_cast<bool>(lse_close), std::string("lse differs from the reference ") + lse_close.message(), c.text);
  }

  // One thread gives the same bits.
  Options one = c.options;
  one.threads = 1;
  std::vector<Out> again = out_before;
  std::vector<float> again_lse = lse_before;
  TensorView<float> again_lv = lse_view(again_lse.data(), c.batch, c.q_heads, c.q_len);
  with_cache([&](const auto& view) {
    require(!rejects(pattern, qv, view, bhld(again.data(), c.batch, c.q_heads, c.q_len, c.value_dim),
                     c.with_lse ? &again_lv : nullptr, one),
            "rejected on one thread, accepted on more", c.text);
  });
  require(same_bytes(out, again), "out differs between thread counts", c.text);
  require(same_bytes(lse, again_lse), "lse differs between thread counts", c.text);
}

/// The element types of a case: cache, queries, out.
template <class P>
void run_types(ByteReader& in, const DecodeCase& drawn, const P& pattern, bool decodable, index_t cache_type) {
  const index_t query_type = in.in_range(0, 2);
  const bool float_out = in.flag();
  // The 8-bit query mode: often over 8-bit caches, rarely over others (an error). Drawn last,
  // so inputs written before it decode as they did (an exhausted input reads zeros: off).
  DecodeCase c = drawn;
  c.options.quantized_query = cache_type == 3 ? in.flag() : in.rare();
  c.text += c.options.quantized_query ? " quantized query" : "";
  const auto with_query = [&]<class E>(std::type_identity<E>) {
    switch (query_type) {
      case 1:
        float_out ? run_case<E, bfloat16, float>(c, pattern, decodable)
                  : run_case<E, bfloat16, bfloat16>(c, pattern, decodable);
        break;
      case 2:
        float_out ? run_case<E, float16, float>(c, pattern, decodable)
                  : run_case<E, float16, float16>(c, pattern, decodable);
        break;
      default:
        run_case<E, float, float>(c, pattern, decodable);
    }
  };
  switch (cache_type) {
    case 1:
      with_query(std::type_identity<bfloat16>{});
      break;
    case 2:
      with_query(std::type_identity<float16>{});
      break;
    case 3:
      with_query(std::type_identity<q8_0_block>{});
      break;
    default:
      with_query(std::type_identity<float>{});
  }
}

}  // namespace
}  // namespace attnkit::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace attnkit;
  using namespace attnkit::fuzz;
  ByteReader in(data, size);
  DecodeCase c;
  const index_t cache_type = in.in_range(0, 3);
  c.batch = in.in_range(1, 3);
  c.kv_heads = in.in_range(1, 3);
  c.q_heads = c.kv_heads * in.in_range(1, 4) + (in.rare() ? 1 : 0);  // rarely not a multiple
  c.capacity = in.in_range(1, 200);
  // Head dims: whole 8-bit blocks for a q8_0 cache (its views count blocks).
  c.head_dim = cache_type == 3 ? 32 * in.in_range(1, 2) : in.in_range(1, 64);
  c.value_dim = cache_type == 3 ? 32 * in.in_range(1, 2) : in.in_range(1, 64);
  c.q_len = in.rare() ? (in.flag() ? 0 : kDecodeScheduleRows + in.in_range(1, 200)) : in.in_range(1, 4);
  c.paged = in.flag();
  const index_t page_sizes[] = {1, 2, 3, 8, 16, 64};
  c.page_size = page_sizes[in.in_range(0, 5)];
  if (c.paged) c.capacity = (c.capacity + c.page_size - 1) / c.page_size * c.page_size;  // whole pages
  c.share_first_page = c.paged && in.byte() < 0x40;
  for (index_t b = 0; b < c.batch; ++b) c.lengths.push_back(in.byte() < 0x30 ? 0 : in.in_range(0, c.capacity));
  if (c.share_first_page && c.batch > 1) {
    // Sharing a page means sharing its tokens: both sequences hold all of it or neither does.
    const index_t shared = std::min(c.page_size, c.capacity);
    for (index_t b = 0; b < 2; ++b)
      c.lengths[static_cast<std::size_t>(b)] = std::max(c.lengths[static_cast<std::size_t>(b)], shared);
  }
  if (in.rare()) c.lengths.back() = c.capacity + 1;  // an error
  c.options.threads = in.flag() ? 2 : 0;
  if (in.flag()) c.options.scale = static_cast<double>(in.in_range(1, 16)) / 8;
  c.with_lse = in.flag();
  c.ragged_append = in.flag();
  // Score modifiers (SPEC.md section 14): softcap off, 1/2 or 4; ALiBi's slopes, or 16x steeper.
  c.options.softcap = in.flag() ? (in.flag() ? 0.5 : 4.0) : 0.0;
  if (in.flag() && c.q_heads > 0) {
    c.options.alibi_slopes = alibi_slopes(c.q_heads);
    if (in.flag())
      for (double& slope : c.options.alibi_slopes) slope *= 16;
  }
  c.seed = in.seed();

  // The pattern, decoded for the square shape of the capacity: every registered kind (those
  // that cannot decode must be refused), or StreamingLLM's sinks plus causal window.
  const AttentionShape square{c.batch, c.q_heads, c.kv_heads, c.capacity, c.capacity, c.head_dim, c.value_dim};
  const index_t choice = in.in_range(0, static_cast<index_t>(fuzz_kinds().size()));
  std::ostringstream text;
  text << "cache " << cache_type << (c.paged ? " paged page " + std::to_string(c.page_size) : " contiguous")
       << (c.share_first_page ? " shared" : "") << " B " << c.batch << " Hq " << c.q_heads << " Hk " << c.kv_heads
       << " cap " << c.capacity << " D " << c.head_dim << " Dv " << c.value_dim << " Lq " << c.q_len << " lengths";
  for (index_t length : c.lengths) text << " " << length;
  text << " threads " << c.options.threads << (c.ragged_append ? " ragged append" : "") << " softcap "
       << c.options.softcap << " alibi slopes " << c.options.alibi_slopes.size() << " seed " << c.seed;
  try {
    if (choice == static_cast<index_t>(fuzz_kinds().size())) {
      if (in.flag()) {
        const SlidingWindow pattern = SlidingWindow::streaming(in.in_range(0, 64), in.in_range(0, 8));
        c.text = "StreamingLLM " + text.str();
        run_types(in, c, pattern, true, cache_type);
      } else {
        const Union pattern{SlidingWindow::causal(in.in_range(0, 64)), Global(decode_tokens(in, 8))};
        c.text = "causal window and global tokens " + text.str();
        run_types(in, c, pattern, true, cache_type);
      }
    } else {
      // Every registered kind through the AnyKind variant (as a Schedule layer): the decodable
      // ones run, the others must be refused at run time.
      const FuzzKind& kind = fuzz_kinds()[static_cast<std::size_t>(choice)];
      const AnyKind layer = kind.decode(in, square, kind.variant);
      const bool decodable =
          std::visit([](const auto& held) { return DecodablePattern<std::remove_cvref_t<decltype(held)>>; }, layer);
      c.text = kind.name + " " + text.str();
      run_types(in, c, layer, decodable, cache_type);
    }
  } catch (const attnkit::invalid_argument&) {
    return 0;  // a constructor refused its parameters
  }
  return 0;
}
