// attnkit::attention on packed sequences (packed.hpp, SPEC.md section 0 "Packed sequences"):
// each sequence's rows match reference::attention on that sequence alone (its pattern cut to
// its keys), equal the tensor call on that sequence bit for bit, and every bad argument, for
// any one sequence, is an invalid_argument with nothing written.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attnkit/attnkit.hpp"
#include "support/accuracy.hpp"
#include "support/plan_checks.hpp"
#include "support/test_cache.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

constexpr index_t kQHeads = 4, kKvHeads = 2, kDim = 32, kValueDim = 16;

/// Packed q, k, v of element type E for sequences of (rows, keys) counts, N(0, 1) values.
template <class E>
struct Packed {
  std::vector<index_t> query_offsets{0}, key_offsets{0};
  std::vector<E> q, k, v;

  explicit Packed(const std::vector<std::pair<index_t, index_t>>& counts, std::uint64_t seed) {
    for (const auto& [rows, keys] : counts) {
      query_offsets.push_back(query_offsets.back() + rows);
      key_offsets.push_back(key_offsets.back() + keys);
    }
    q = make_queries<E>(kQHeads * total_rows() * kDim, seed);
    k = make_queries<E>(kKvHeads * total_keys() * kDim, seed + 1);
    v = make_queries<E>(kKvHeads * total_keys() * kValueDim, seed + 2);
  }
  index_t batch() const { return static_cast<index_t>(query_offsets.size()) - 1; }
  index_t total_rows() const { return query_offsets.back(); }
  index_t total_keys() const { return key_offsets.back(); }
  TensorView<const E> qv() const { return bhld(q.data(), 1, kQHeads, total_rows(), kDim); }
  TensorView<const E> kv() const { return bhld(k.data(), 1, kKvHeads, total_keys(), kDim); }
  TensorView<const E> vv() const { return bhld(v.data(), 1, kKvHeads, total_keys(), kValueDim); }
};

/// Every mask kind and combination: the packed call against reference::attention run on each
/// sequence's rows and keys alone with sequence_prefix(pattern, keys), in double. Sequences:
/// square, fewer rows than keys (bottom-right causal), more rows than keys (the first empty),
/// rows without keys, no rows, and a long one; square ones for the kinds sequence_prefix cuts
/// (Global's rule for other shapes: tokens below min(rows, keys); BlockSparse's: a layout of
/// the query blocks).
void expect_packed_matches_reference(const Packed<float>& packed, const auto& pattern, const std::string& name,
                                     const Options& options = {}) {
  std::vector<double> q(packed.q.begin(), packed.q.end()), k(packed.k.begin(), packed.k.end()),
      v(packed.v.begin(), packed.v.end());
  const auto qd = bhld(static_cast<const double*>(q.data()), 1, kQHeads, packed.total_rows(), kDim);
  const auto kd = bhld(static_cast<const double*>(k.data()), 1, kKvHeads, packed.total_keys(), kDim);
  const auto vd = bhld(static_cast<const double*>(v.data()), 1, kKvHeads, packed.total_keys(), kValueDim);
  std::vector<float> out(static_cast<std::size_t>(kQHeads * packed.total_rows() * kValueDim), kNaN);
  std::vector<float> lse(static_cast<std::size_t>(kQHeads * packed.total_rows()), kNaN);
  attention(pattern, packed.qv(), packed.query_offsets, packed.kv(), packed.vv(), packed.key_offsets,
            bhld(out.data(), 1, kQHeads, packed.total_rows(), kValueDim),
            lse_view(lse.data(), 1, kQHeads, packed.total_rows()), options);
  std::vector<double> ref(out.size()), ref_lse(lse.size());
  const auto ref_view = bhld(ref.data(), 1, kQHeads, packed.total_rows(), kValueDim);
  const auto ref_lse_view = lse_view(ref_lse.data(), 1, kQHeads, packed.total_rows());
  for (index_t b = 0; b < packed.batch(); ++b) {
    const index_t first_row = packed.query_offsets[static_cast<std::size_t>(b)],
                  rows = packed.query_offsets[static_cast<std::size_t>(b) + 1] - first_row;
    const index_t first_key = packed.key_offsets[static_cast<std::size_t>(b)],
                  keys = packed.key_offsets[static_cast<std::size_t>(b) + 1] - first_key;
    reference::attention(sequence_prefix(pattern, keys), qd.rows(0, first_row, rows), kd.rows(0, first_key, keys),
                         vd.rows(0, first_key, keys), ref_view.rows(0, first_row, rows),
                         ref_lse_view.rows(0, first_row, rows), options);
  }
  const std::vector<double> got(out.begin(), out.end()), got_lse(lse.begin(), lse.end());
  const auto view = [&](const std::vector<double>& x, index_t dim) {
    return bhld(x.data(), 1, kQHeads, packed.total_rows(), dim);
  };
  EXPECT_TRUE(all_close<double>(view(got, kValueDim), view(ref, kValueDim), decode_tolerance<float>())) << name;
  EXPECT_TRUE(all_close<double>(view(got_lse, 1), view(ref_lse, 1), Tolerance{2e-5, 1e-6})) << name << " (lse)";
}

TEST(PackedSequences, EveryMaskKindMatchesTheReferencePerSequence) {
  const Packed<float> packed({{37, 37}, {20, 150}, {30, 10}, {5, 0}, {0, 12}, {200, 200}}, 81);
  const Packed<float> square({{37, 37}, {0, 0}, {150, 150}, {12, 12}, {200, 200}}, 84);
  const auto check = [&](const auto& pattern, const std::string& name, const Options& options = {}) {
    expect_packed_matches_reference(packed, pattern, name, options);
  };
  check(Full{}, "Full");
  check(Full{.causal = true}, "Full causal");
  check(SlidingWindow::streaming(16, 4), "StreamingLLM");
  check(SlidingWindow::symmetric(9), "symmetric window");
  expect_packed_matches_reference(square, Union{SlidingWindow::causal(16), Global({0, 1, 40, 180})},
                                  "Longformer (tokens past a sequence dropped)");
  check(Dilated(8, 0, {1, 2, 3, 5}), "dilated");
  expect_packed_matches_reference(square, BlockSparse::local(16, 13, true), "causal block-diagonal (cut per sequence)");
  check(PerHead<Full, SlidingWindow>({Full{.causal = true}, SlidingWindow::causal(8), SlidingWindow(5, 5), Full{}}),
        "per head");
  check(Intersection{SlidingWindow::symmetric(50), Full{.causal = true}}, "window and causal");
  Options modified;
  modified.softcap = 2.0;
  modified.alibi_slopes = alibi_slopes(kQHeads);
  check(Full{.causal = true}, "Full causal, softcap and ALiBi", modified);
  const AnyKind layer = SlidingWindow::causal(12);
  check(layer, "a Schedule layer");
}

/// Each sequence's rows equal attnkit::attention on that sequence's rows and keys (copied into
/// their own tensors) bit for bit: float, and bfloat16 with float out; 1 and 2 threads.
template <class E, class Out>
void expect_separate_calls_bit_for_bit(int threads) {
  const Packed<E> packed({{64, 64}, {300, 300}, {1, 1}, {130, 130}, {2, 2}}, 82);
  Options options;
  options.threads = threads;
  const Union pattern{SlidingWindow::causal(40), Global({0, 3})};
  std::vector<Out> out(static_cast<std::size_t>(kQHeads * packed.total_rows() * kValueDim));
  attention(pattern, packed.qv(), packed.query_offsets, packed.kv(), packed.vv(), packed.key_offsets,
            bhld(out.data(), 1, kQHeads, packed.total_rows(), kValueDim), options);
  for (index_t b = 0; b < packed.batch(); ++b) {
    const index_t first_row = packed.query_offsets[static_cast<std::size_t>(b)],
                  rows = packed.query_offsets[static_cast<std::size_t>(b) + 1] - first_row;
    const index_t first_key = packed.key_offsets[static_cast<std::size_t>(b)],
                  keys = packed.key_offsets[static_cast<std::size_t>(b) + 1] - first_key;
    const auto copy = [](const TensorView<const E>& view) {
      std::vector<E> rows_copy;
      for (index_t h = 0; h < view.heads(); ++h)
        for (index_t l = 0; l < view.seq(); ++l)
          rows_copy.insert(rows_copy.end(), view.row(0, h, l), view.row(0, h, l) + view.dim());
      return rows_copy;
    };
    const std::vector<E> q = copy(packed.qv().rows(0, first_row, rows)), k = copy(packed.kv().rows(0, first_key, keys)),
                         v = copy(packed.vv().rows(0, first_key, keys));
    std::vector<Out> alone(static_cast<std::size_t>(kQHeads * rows * kValueDim));
    attention(sequence_prefix(pattern, keys), bhld(q.data(), 1, kQHeads, rows, kDim),
              bhld(k.data(), 1, kKvHeads, keys, kDim), bhld(v.data(), 1, kKvHeads, keys, kValueDim),
              bhld(alone.data(), 1, kQHeads, rows, kValueDim), options);
    const TensorView<const Out> packed_rows =
        bhld(static_cast<const Out*>(out.data()), 1, kQHeads, packed.total_rows(), kValueDim).rows(0, first_row, rows);
    for (index_t h = 0; h < kQHeads; ++h)
      for (index_t i = 0; i < rows; ++i)
        ASSERT_EQ(std::memcmp(packed_rows.row(0, h, i), alone.data() + (h * rows + i) * kValueDim,
                              sizeof(Out) * static_cast<std::size_t>(kValueDim)),
                  0)
            << "sequence " << b << " head " << h << " row " << i << " threads " << threads;
  }
}

TEST(PackedSequences, RowsAreTheSequencesOwnCallsBitForBit) {
  for (int threads : {1, 2}) {
    expect_separate_calls_bit_for_bit<float, float>(threads);
    expect_separate_calls_bit_for_bit<bfloat16, float>(threads);
  }
}

// Bad offsets, options and patterns, also when only one sequence breaks a rule: an
// invalid_argument naming the argument, with nothing written.
TEST(PackedSequences, BadArgumentsWriteNothing) {
  const Packed<float> packed({{10, 10}, {64, 64}}, 83);
  std::vector<float> out(static_cast<std::size_t>(kQHeads * packed.total_rows() * kValueDim), 7.0f);
  const auto out_view = bhld(out.data(), 1, kQHeads, packed.total_rows(), kValueDim);
  const auto call = [&](const auto& pattern, std::vector<index_t> query_offsets, std::vector<index_t> key_offsets,
                        const Options& options = {}) {
    attention(pattern, packed.qv(), query_offsets, packed.kv(), packed.vv(), key_offsets, out_view, options);
  };
  expect_invalid_argument([&] { call(Full{}, {}, {}); }, "query_offsets.size() = 0");
  expect_invalid_argument([&] { call(Full{}, {1, 10, 74}, {0, 10, 74}); }, "query_offsets[0] = 1");
  expect_invalid_argument([&] { call(Full{}, {0, 75, 74}, {0, 10, 74}); }, "query_offsets[2] = 74: must be >=");
  expect_invalid_argument(
      [&] {
        call(Full{}, {0, 10, 70}, {0, 10, 74});
      },
      "query_offsets[2] = 70: must equal q.sizes[seq] = 74");
  expect_invalid_argument([&] { call(Full{}, {0, 10, 74}, {0, 74}); }, "key_offsets.size() = 2");
  expect_invalid_argument([&] { call(Full{}, {0, 10, 74}, {0, 10, 73}); }, "key_offsets[2] = 73");
  Options padded;
  padded.key_lengths = {10, 64};
  expect_invalid_argument([&] { call(Full{}, {0, 10, 74}, {0, 10, 74}, padded); }, "options.key_lengths.size() = 2");
  // Two 16-token blocks: the first sequence (10 tokens) fits, the second (64) does not.
  expect_invalid_argument(
      [&] {
        call(BlockSparse::local(16, 2, true), {0, 10, 74}, {0, 10, 74});
      },
      "BlockSparse: layout query blocks");
  // BigBird attends a sequence's own keys: its rows and keys must be as many.
  expect_invalid_argument([&] { call(BigBird(16, 1, 3), {0, 12, 74}, {0, 10, 74}); }, "BigBird: q_len");
  const AnyKind lsh = Lsh{};
  expect_invalid_argument([&] { call(lsh, {0, 10, 74}, {0, 10, 74}); }, "packed sequences take mask kinds");
  // q with batch 2.
  expect_invalid_argument(
      [&] {
        attention(Full{}, bhld(packed.q.data(), 2, kQHeads, 37, kDim), std::vector<index_t>{0, 37},
                  bhld(packed.k.data(), 2, kKvHeads, 37, kDim), bhld(packed.v.data(), 2, kKvHeads, 37, kValueDim),
                  std::vector<index_t>{0, 37}, bhld(out.data(), 2, kQHeads, 37, kValueDim));
      },
      "q.sizes[batch] = 2");
  for (float x : out) ASSERT_EQ(x, 7.0f);
}

}  // namespace
}  // namespace attnkit::testing
