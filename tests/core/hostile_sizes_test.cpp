// Hostile sizes (README "Limits"): views whose offsets pass 2^31 elements and 2^32 bytes
// (computed exactly) or 2^63 bytes (rejected), lengths of 1 and of 2^20 with tiny heads, and
// pattern parameters at the int64 limits: each call either computes the right result or
// throws attnkit::invalid_argument naming the argument, with nothing written; never a
// wrapped index.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "attnkit/attention.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/pattern/big_bird.hpp"
#include "attnkit/pattern/block_sparse.hpp"
#include "attnkit/pattern/dilated.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/pattern/global.hpp"
#include "attnkit/pattern/kernelized_rpe.hpp"
#include "attnkit/pattern/kinds.hpp"
#include "attnkit/pattern/linformer.hpp"
#include "attnkit/pattern/lsh.hpp"
#include "attnkit/pattern/sliding_window.hpp"
#include "attnkit/reference/attention.hpp"
#include "support/accuracy.hpp"
#include "support/pattern_checks.hpp"
#include "support/test_data.hpp"

namespace attnkit {
namespace {

using testing::expect_invalid_argument;
using testing::InputSet;
using testing::Layout;
using testing::Tensor;

constexpr index_t kMax = std::numeric_limits<index_t>::max();

/// Expects `call` to throw attnkit::invalid_argument mentioning `fragment` and leave `out`
/// (filled with 7 beforehand) untouched.
template <class Call>
void expect_rejected_untouched(Call&& call, std::vector<float>& out, const std::string& fragment) {
  std::fill(out.begin(), out.end(), 7.0f);
  expect_invalid_argument(call, fragment);
  for (float x : out) ASSERT_EQ(x, 7.0f) << "written before the error";
}

TEST(HostileSizes, ViewsWhoseByteOffsetsPassInt64AreRejected) {
  std::vector<float> x(64, 1.0f), out(64);
  const TensorView<const float> small = bhld(static_cast<const float*>(x.data()), 1, 1, 4, 4);
  const TensorView<float> small_out = bhld(out.data(), 1, 1, 4, 4);
  // 4 rows 2^61 elements apart: element offsets fit int64 (3 * 2^61), byte offsets (x 4) do not.
  const TensorView<const float> far(x.data(), {1, 1, 4, 4}, {64, 64, index_t{1} << 61, 1});
  expect_rejected_untouched([&] { attention(Full{}, far, small, small, small_out); }, out,
                            "byte offsets overflow int64");
  // The same for the output view.
  const TensorView<float> far_out(out.data(), {1, 1, 4, 4}, {64, 64, index_t{1} << 61, 1});
  expect_rejected_untouched([&] { attention(Full{}, small, small, small, far_out); }, out, "out");
  // Element offsets that overflow on their own, and the one stride whose magnitude is not an int64.
  const TensorView<const float> farther(x.data(), {1, 1, 4, 4}, {64, 64, kMax / 2, 1});
  expect_rejected_untouched([&] { attention(Full{}, small, farther, small, small_out); }, out, "k.strides[seq]");
  const TensorView<const float> minimum(x.data(), {1, 1, 4, 4}, {64, 64, std::numeric_limits<index_t>::min(), 1});
  expect_rejected_untouched([&] { attention(Full{}, small, small, minimum, small_out); }, out, "v.strides[seq]");
  // Sizes whose element count passes int64 in the view helpers.
  expect_invalid_argument([&] { blhd(x.data(), index_t{1} << 32, index_t{1} << 32, 1, 1); }, "overflows int64");
}

/// An anonymous mapping of `bytes` that reserves no memory: only the pages touched are backed,
/// so views may place rows gibibytes apart.
class SparseMapping {
 public:
  explicit SparseMapping(std::size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<float*>(p);
  }
  ~SparseMapping() {
    if (base_ != nullptr) munmap(base_, bytes_);
  }
  SparseMapping(const SparseMapping&) = delete;
  SparseMapping& operator=(const SparseMapping&) = delete;
  float* base() const { return base_; }

 private:
  std::size_t bytes_;
  float* base_;
};

/// A view of `source`'s sizes whose head h starts h * (2^31 + 64) elements after `origin`
/// (beyond 2^31 elements and 2^33 bytes for h = 1), holding `source`'s values.
TensorView<float> far_heads_copy(float* origin, const Tensor<float>& source) {
  const auto& s = source.view.sizes();
  const index_t head_stride = (index_t{1} << 31) + 64;
  const TensorView<float> view(origin, s, {head_stride * s[kHeads], head_stride, s[kDim], 1});
  for (index_t b = 0; b < s[kBatch]; ++b)
    for (index_t h = 0; h < s[kHeads]; ++h)
      for (index_t l = 0; l < s[kSeq]; ++l)
        for (index_t d = 0; d < s[kDim]; ++d) view(b, h, l, d) = source.view(b, h, l, d);
  return view;
}

TEST(HostileSizes, RowsBeyondTwoToThe31ElementsAreTheRowsRead) {
  // Two heads 2^31 + 64 elements (8 GiB) apart; q, k, v and out interleaved in the first 64.
  SparseMapping mapping(static_cast<std::size_t>((index_t{1} << 31) + 256) * sizeof(float));
  if (mapping.base() == nullptr) GTEST_SKIP() << "the kernel refused an 8 GiB MAP_NORESERVE mapping";
  const AttentionShape s{1, 2, 2, 3, 3, 2, 3};
  const testing::Problem<float> p = testing::make_problem<float>(s, InputSet::kNormal, 3);
  const TensorView<float> q = far_heads_copy(mapping.base(), p.q);
  const TensorView<float> v = far_heads_copy(mapping.base() + 16, p.v);
  Tensor<float> out_shape(1, 2, 3, 3, Layout::kBHLD);
  const TensorView<float> out = far_heads_copy(mapping.base() + 32, out_shape);
  Lsh lsh;
  lsh.chunk = 2;
  const std::vector<AnyKind> kinds{Full{.causal = true},
                                   SlidingWindow(1, 0),
                                   Global({1}),
                                   Linformer::gaussian(2, 3, 1, 5),
                                   lsh,
                                   KernelizedRpe{.features = 4, .algorithm = RpeAlgorithm::kFft}};
  for (std::size_t kind = 0; kind < kinds.size(); ++kind) {
    // Keys shared with the queries, as Lsh needs.
    attention(kinds[kind], TensorView<const float>(q), TensorView<const float>(q), TensorView<const float>(v), out);
    Tensor<float> ref(1, 2, 3, 3, Layout::kBHLD);
    reference::attention(kinds[kind], p.q.cview(), p.q.cview(), p.v.cview(), ref.view);
    Tensor<float> got(1, 2, 3, 3, Layout::kBHLD);
    for (index_t h = 0; h < 2; ++h)
      for (index_t i = 0; i < 3; ++i)
        for (index_t d = 0; d < 3; ++d) got.view(0, h, i, d) = out(0, h, i, d);
    // A wrapped offset would read another head's or an unmapped row: errors of order |V|.
    EXPECT_TRUE(
        testing::all_close(got, ref, testing::Tolerance{1e-3 * (testing::max_abs(p.v) + testing::max_abs(ref)), 0}))
        << "kind " << kind;
  }
}

/// softmax(sigma q_i . k_j) v_j over keys j in [i - left, i + right] (SPEC.md section 2),
/// in double, for one row of a D = Dv = 1 problem.
double window_row(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, index_t i, index_t left,
                  index_t right) {
  const index_t n = k.view.seq();
  const index_t begin = std::max<index_t>(0, i - left), end = std::min<index_t>(n - 1, i + right);
  double top = -std::numeric_limits<double>::infinity();
  for (index_t j = begin; j <= end; ++j)
    top = std::max(top, static_cast<double>(q.view(0, 0, i, 0)) * k.view(0, 0, j, 0));
  double sum = 0, weighted = 0;
  for (index_t j = begin; j <= end; ++j) {
    const double w = std::exp(static_cast<double>(q.view(0, 0, i, 0)) * k.view(0, 0, j, 0) - top);
    sum += w;
    weighted += w * v.view(0, 0, j, 0);
  }
  return weighted / sum;
}

constexpr index_t kLong = index_t{1} << 20;

TEST(HostileSizes, OneQueryAgainstTwoToThe20KeysAndTheReverse) {
  for (const auto& [lq, lk] : {std::pair{index_t{1}, kLong}, std::pair{kLong, index_t{1}}}) {
    const AttentionShape s{1, 1, 1, lq, lk, 1, 2};
    const testing::Problem<float> p = testing::make_problem<float>(s, InputSet::kNormal, 8);
    for (const bool causal : {false, true}) {
      Tensor<float> out(1, 1, lq, 2, Layout::kBHLD), ref = out, lse(1, 1, lq, 1, Layout::kBHLD), ref_lse = lse;
      attention(Full{.causal = causal}, p.q.cview(), p.k.cview(), p.v.cview(), out.view, lse.view);
      reference::attention(Full{.causal = causal}, p.q.cview(), p.k.cview(), p.v.cview(), ref.view, ref_lse.view);
      EXPECT_TRUE(testing::all_close(out, ref, testing::Tolerance{2e-5 * testing::max_abs(p.v), 1e-4}))
          << lq << " x " << lk;
      EXPECT_TRUE(testing::all_close(lse, ref_lse, testing::Tolerance{2e-5, 2e-5})) << lq << " x " << lk;
    }
  }
}

TEST(HostileSizes, SlidingWindowOverTwoToThe20Positions) {
  const AttentionShape s{1, 1, 1, kLong, kLong, 1, 1};
  const testing::Problem<float> p = testing::make_problem<float>(s, InputSet::kNormal, 9);
  Tensor<float> out(1, 1, kLong, 1, Layout::kBHLD);
  attention(SlidingWindow(2, 1), p.q.cview(), p.k.cview(), p.v.cview(), out.view, Options{.scale = 1.0});
  for (const index_t i : {index_t{0}, index_t{1}, index_t{63}, index_t{64}, (index_t{1} << 16) - 1, index_t{1} << 16,
                          (index_t{1} << 19) + 5, kLong - 2, kLong - 1}) {
    const double expected = window_row(p.q, p.k, p.v, i, 2, 1);
    EXPECT_NEAR(out.view(0, 0, i, 0), expected, 2e-5 * testing::max_abs(p.v) + 1e-4 * std::abs(expected))
        << "row " << i;
  }
}

TEST(HostileSizes, LinformerProjectsTwoToThe20Keys) {
  const AttentionShape s{1, 1, 1, 3, kLong, 2, 2};
  const testing::Problem<float> p = testing::make_problem<float>(s, InputSet::kNormal, 10);
  const Linformer lin = Linformer::gaussian(4, kLong, 1, 3);
  Tensor<float> out(1, 1, 3, 2, Layout::kBHLD), ref = out;
  attention(lin, p.q.cview(), p.k.cview(), p.v.cview(), out.view);
  reference::attention(lin, p.q.cview(), p.k.cview(), p.v.cview(), ref.view);
  // Sums of 2^20 float products: the projection's own rounding, sqrt(Lk) u, sets the scale.
  EXPECT_TRUE(testing::all_close(out, ref, testing::Tolerance{1e-4 * (testing::max_abs(ref) + 1), 1e-3}));
}

/// Lsh and KernelizedRpe over 2^20 positions (no float64 reference at this length: O(n^2)):
/// finite outputs inside the range of V (both are convex combinations here: positive random
/// features keep KernelizedRpe's weights positive), and for Lsh the same bits on one thread
/// and on two. (KernelizedRpe runs once: its 2^21-point transforms take 20 s under ASan.)
TEST(HostileSizes, LshAndKernelizedRpeOverTwoToThe20Positions) {
  const AttentionShape s{1, 1, 1, kLong, kLong, 2, 1};
  const testing::Problem<float> p = testing::make_problem<float>(s, InputSet::kNormal, 11);
  Lsh lsh;
  lsh.chunk = 8;
  lsh.buckets = 64;
  const auto [lowest, highest] = std::minmax_element(p.v.data.begin(), p.v.data.end());
  const auto expect_convex = [&](const Tensor<float>& out, const char* name) {
    for (float x : out.data) {
      ASSERT_TRUE(std::isfinite(x)) << name;
      ASSERT_GE(x, *lowest - 1e-4f) << name;
      ASSERT_LE(x, *highest + 1e-4f) << name;
    }
  };
  Tensor<float> one(1, 1, kLong, 1, Layout::kBHLD), two = one;
  attention(lsh, p.q.cview(), p.q.cview(), p.v.cview(), one.view, Options{.threads = 1});
  attention(lsh, p.q.cview(), p.q.cview(), p.v.cview(), two.view, Options{.threads = 2});
  EXPECT_EQ(one.data, two.data);
  expect_convex(one, "Lsh");
  const KernelizedRpe rpe{.features = 2, .seed = 1, .algorithm = RpeAlgorithm::kFft};
  attention(rpe, p.q.cview(), p.q.cview(), p.v.cview(), one.view);
  expect_convex(one, "KernelizedRpe");
}

TEST(HostileSizes, ParametersAtTheInt64LimitsRunOrAreRejected) {
  const AttentionShape s{1, 2, 2, 37, 37, 5, 3};
  const testing::Problem<float> p = testing::make_problem<float>(s, InputSet::kNormal, 12);
  // Unbounded radii, blocks and chunks longer than any sequence, a dilation beyond it: each
  // runs as the pattern its definition gives (keys shared with the queries, as Lsh needs).
  const auto matches_reference = [&](const AnyKind& layer, const char* name) {
    Tensor<float> out(1, 2, 37, 3, Layout::kBHLD);
    attention(layer, p.q.cview(), p.q.cview(), p.v.cview(), out.view);
    Tensor<float> ref(1, 2, 37, 3, Layout::kBHLD);
    reference::attention(layer, p.q.cview(), p.q.cview(), p.v.cview(), ref.view);
    EXPECT_TRUE(testing::all_close(out, ref, testing::Tolerance{2e-5 * testing::max_abs(p.v), 1e-4})) << name;
  };
  matches_reference(SlidingWindow(kMax, kMax), "SlidingWindow(max, max)");
  matches_reference(Dilated(kMax, kMax, {kMax}), "Dilated(max, max, {max})");
  matches_reference(BlockSparse::local(kMax, 1), "BlockSparse::local(max)");
  matches_reference(BigBird(kMax, kMax, 1), "BigBird(max, max)");
  Lsh lsh;
  lsh.chunk = kMax;
  matches_reference(lsh, "Lsh chunk max");

  // Counts beyond their documented maximum.
  std::vector<float> out(2 * 37 * 3);
  const TensorView<float> out_view = bhld(out.data(), 1, 2, 37, 3);
  for (const auto& [field, name] : {std::pair{&Lsh::rounds, "Lsh.rounds"}, std::pair{&Lsh::before, "Lsh.before"},
                                    std::pair{&Lsh::after, "Lsh.after"}}) {
    Lsh huge;
    huge.chunk = 4;
    huge.*field = kMax;
    expect_rejected_untouched([&] { attention(huge, p.q.cview(), p.q.cview(), p.v.cview(), out_view); }, out, name);
  }
  expect_rejected_untouched([&] { attention(Global({kMax - 1}), p.q.cview(), p.k.cview(), p.v.cview(), out_view); },
                            out, "Global");
}

TEST(HostileSizes, KernelizedRpeFftLengthHasAMaximum) {
  // Rows with stride 0: 2^29 + 1 queries and keys over one stored row, so nothing is allocated
  // for the inputs; the FFT path would need a circulant of 2^31 points.
  std::vector<float> row(4, 0.5f), out(4, 7.0f);
  const index_t n = (index_t{1} << 29) + 1;
  const TensorView<const float> x(row.data(), {1, 1, n, 4}, {4, 4, 0, 1});
  const TensorView<float> o(out.data(), {1, 1, n, 4}, {4, 4, 0, 1});
  const AttentionShape s{1, 1, 1, n, n, 4, 4};
  EXPECT_FALSE((KernelizedRpe{.algorithm = RpeAlgorithm::kAuto}.uses_fft(s)))
      << "beyond the maximum kAuto sums directly";
  expect_rejected_untouched([&] { attention(KernelizedRpe{.algorithm = RpeAlgorithm::kFft}, x, x, x, o); }, out,
                            "2^30");
  EXPECT_EQ(kernel::circulant_length(n - 1, n - 1), index_t{1} << 30);
  expect_invalid_argument([&] { kernel::circulant_length(kMax, kMax); }, "2^30");
}

}  // namespace
}  // namespace attnkit
