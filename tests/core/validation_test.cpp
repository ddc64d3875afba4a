// Every bad-input rule throws attnkit::invalid_argument naming argument, value and rule, and
// leaves the output untouched.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "attnkit/attention.hpp"
#include "attnkit/core/errors.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/pattern/full.hpp"
#include "attnkit/reference/attention.hpp"

namespace attnkit {
namespace {

constexpr float kSentinel = 7.0f;

/// A valid call: q [2, 4, 5, 3], k/v [2, 2, 6, 3 / 2], out [2, 4, 5, 2], lse [2, 4, 5, 1].
struct ValidCall {
  std::vector<float> q = std::vector<float>(2 * 4 * 5 * 3, 0.5f);
  std::vector<float> k = std::vector<float>(2 * 2 * 6 * 3, 0.25f);
  std::vector<float> v = std::vector<float>(2 * 2 * 6 * 2, 1.0f);
  std::vector<float> out = std::vector<float>(2 * 4 * 5 * 2, kSentinel);
  std::vector<float> lse = std::vector<float>(2 * 4 * 5, kSentinel);
  TensorView<const float> qv = bhld(static_cast<const float*>(q.data()), 2, 4, 5, 3);
  TensorView<const float> kv = bhld(static_cast<const float*>(k.data()), 2, 2, 6, 3);
  TensorView<const float> vv = bhld(static_cast<const float*>(v.data()), 2, 2, 6, 2);
  TensorView<float> outv = bhld(out.data(), 2, 4, 5, 2);
  TensorView<float> lsev = lse_view(lse.data(), 2, 4, 5);
  Options options;

  void run() { attention(Full{}, qv, kv, vv, outv, lsev, options); }
  bool untouched() const {
    for (float x : out)
      if (x != kSentinel) return false;
    for (float x : lse)
      if (x != kSentinel) return false;
    return true;
  }
};

/// Expects `mutate` to make the call throw attnkit::invalid_argument whose message holds every
/// fragment, with nothing written.
void expect_rejected(const std::function<void(ValidCall&)>& mutate, const std::vector<std::string>& fragments) {
  ValidCall call;
  mutate(call);
  try {
    call.run();
    ADD_FAILURE() << "no exception for a call expected to mention '" << fragments.front() << "'";
  } catch (const attnkit::invalid_argument& error) {
    const std::string message = error.what();
    for (const std::string& fragment : fragments)
      EXPECT_NE(message.find(fragment), std::string::npos) << "message: " << message << "\nmissing: " << fragment;
  }
  EXPECT_TRUE(call.untouched());
}

template <class T>
TensorView<T> with_size(TensorView<T> view, int axis, index_t size) {
  auto sizes = view.sizes();
  sizes[axis] = size;
  return TensorView<T>(view.data(), sizes, view.strides());
}

template <class T>
TensorView<T> with_stride(TensorView<T> view, int axis, index_t stride) {
  auto strides = view.strides();
  strides[axis] = stride;
  return TensorView<T>(view.data(), view.sizes(), strides);
}

TEST(Validation, ValidCallWritesOutput) {
  ValidCall call;
  call.run();
  EXPECT_FALSE(call.untouched());
}

TEST(Validation, IsAStdInvalidArgument) {
  ValidCall call;
  call.options.threads = -1;
  EXPECT_THROW(call.run(), std::invalid_argument);
}

TEST(Validation, NegativeSize) {
  expect_rejected([](ValidCall& c) { c.qv = with_size(c.qv, kSeq, -1); }, {"q.sizes[seq]", "-1", ">= 0"});
}

TEST(Validation, ZeroHeadDim) {
  expect_rejected([](ValidCall& c) { c.vv = with_size(c.vv, kDim, 0); }, {"v.sizes[dim]", "= 0", ">= 1"});
}

TEST(Validation, LastStrideNotOne) {
  expect_rejected([](ValidCall& c) { c.kv = with_stride(c.kv, kDim, 2); }, {"k.strides[dim]", "= 2", "must be 1"});
}

TEST(Validation, NullData) {
  expect_rejected([](ValidCall& c) { c.vv = TensorView<const float>(nullptr, c.vv.sizes(), c.vv.strides()); },
                  {"v.data", "nullptr", "must not be null"});
}

TEST(Validation, BatchMismatch) {
  expect_rejected([](ValidCall& c) { c.kv = with_size(c.kv, kBatch, 1); }, {"k.sizes[batch]", "= 1", "q.sizes[batch]"});
}

TEST(Validation, HeadDimMismatch) {
  expect_rejected([](ValidCall& c) { c.kv = with_size(c.kv, kDim, 2); }, {"k.sizes[dim]", "= 2", "q.sizes[dim]"});
}

TEST(Validation, QueryHeadsNotAMultipleOfKeyHeads) {
  expect_rejected(
      [](ValidCall& c) {
        c.kv = with_size(c.kv, kHeads, 3);
        c.vv = with_size(c.vv, kHeads, 3);
      },
      {"k.sizes[heads]", "= 3", "multiple"});
}

TEST(Validation, ValueHeadsMismatch) {
  expect_rejected([](ValidCall& c) { c.vv = with_size(c.vv, kHeads, 1); }, {"v.sizes[heads]", "= 1", "k.sizes[heads]"});
}

TEST(Validation, ValueLengthMismatch) {
  expect_rejected([](ValidCall& c) { c.vv = with_size(c.vv, kSeq, 5); }, {"v.sizes[seq]", "= 5", "k.sizes[seq]"});
}

TEST(Validation, OutputShapeMismatch) {
  expect_rejected([](ValidCall& c) { c.outv = with_size(c.outv, kSeq, 4); }, {"out.sizes[seq]", "= 4", "q.sizes[seq]"});
  expect_rejected([](ValidCall& c) { c.outv = with_size(c.outv, kDim, 3); }, {"out.sizes[dim]", "= 3", "v.sizes[dim]"});
  expect_rejected([](ValidCall& c) { c.outv = with_size(c.outv, kHeads, 2); },
                  {"out.sizes[heads]", "= 2", "q.sizes[heads]"});
}

TEST(Validation, LseShapeMismatch) {
  expect_rejected([](ValidCall& c) { c.lsev = with_size(c.lsev, kSeq, 3); }, {"lse.sizes[seq]", "= 3", "q.sizes[seq]"});
  expect_rejected([](ValidCall& c) { c.lsev = with_size(c.lsev, kDim, 2); }, {"lse.sizes[dim]", "= 2", "must be 1"});
}

TEST(Validation, OffsetOverflow) {
  // (5 - 1) * stride overflows int64.
  expect_rejected([](ValidCall& c) { c.qv = with_stride(c.qv, kSeq, std::numeric_limits<index_t>::max() / 2); },
                  {"q.strides[seq]", "overflow"});
}

TEST(Validation, NonFiniteScale) {
  expect_rejected([](ValidCall& c) { c.options.scale = std::nan(""); }, {"options.scale", "nan", "finite"});
}

TEST(Validation, NegativeThreads) {
  expect_rejected([](ValidCall& c) { c.options.threads = -2; }, {"options.threads", "-2", ">= 0"});
}

TEST(Validation, ReferenceValidatesTheSameWay) {
  ValidCall call;
  call.kv = with_size(call.kv, kDim, 2);
  EXPECT_THROW(reference::attention(Full{}, call.qv, call.kv, call.vv, call.outv), attnkit::invalid_argument);
  EXPECT_TRUE(call.untouched());
}

// out and lse must share no memory with another argument: out = v (a whole alias) used to run
// and return a wrong result, since the kernels read v's rows after out's were written.
TEST(Validation, OutputOverlappingAnInputIsRejected) {
  // q, k, v and out all [1, 2, 8, 4] (Hq = Hk, Lq = Lk, D = Dv), so out can sit on any input.
  constexpr index_t kElements = 1 * 2 * 8 * 4;
  std::vector<float> arena(4 * kElements + 2 * 8);
  for (std::size_t i = 0; i < arena.size(); ++i) arena[i] = 0.01f * static_cast<float>(i % 97);
  const auto input = [&](index_t slot) {
    return bhld(static_cast<const float*>(arena.data()) + slot * kElements, 1, 2, 8, 4);
  };
  const auto output = [&](index_t offset) { return bhld(arena.data() + offset, 1, 2, 8, 4); };
  const TensorView<const float> q = input(0), k = input(1), v = input(2);
  const auto expect_overlap = [&](const TensorView<float>& out, const TensorView<float>* lse, const std::string& first,
                                  const std::string& second) {
    const std::vector<float> before = arena;
    try {
      if (lse != nullptr) {
        attention(Full{}, q, k, v, out, *lse);
      } else {
        attention(Full{}, q, k, v, out);
      }
      ADD_FAILURE() << "no exception for " << first << " over " << second;
    } catch (const attnkit::invalid_argument& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(first + " must not overlap " + second), std::string::npos) << message;
    }
    EXPECT_EQ(arena, before) << first << " over " << second << ": something was written";
  };
  expect_overlap(output(2 * kElements), nullptr, "out", "v");                  // out = v
  expect_overlap(output(2 * kElements + kElements / 2), nullptr, "out", "v");  // out's first half is v's second
  expect_overlap(output(kElements - 1), nullptr, "out", "q");                  // one shared element with q
  expect_overlap(output(kElements + 5), nullptr, "out", "k");
  // lse [1, 2, 8, 1] over q's first rows, and over out's.
  TensorView<float> lse_over_q = lse_view(arena.data() + 3, 1, 2, 8);
  expect_overlap(output(3 * kElements), &lse_over_q, "lse", "q");
  TensorView<float> lse_over_out = lse_view(arena.data() + 3 * kElements + 4, 1, 2, 8);
  expect_overlap(output(3 * kElements), &lse_over_out, "lse", "out");

  // Interleaved rows that share no byte: q and out as the two halves of a [1, 2, 8, 2 x 4]
  // buffer (row stride 8): their address ranges intersect, their rows do not. Accepted.
  std::vector<float> fused(static_cast<std::size_t>(2 * kElements));
  const TensorView<float> fused_out(fused.data() + 4, {1, 2, 8, 4}, {2 * 8 * 8, 8 * 8, 8, 1});
  const TensorView<float> fused_q(fused.data(), {1, 2, 8, 4}, {2 * 8 * 8, 8 * 8, 8, 1});
  for (index_t h = 0; h < 2; ++h)
    for (index_t l = 0; l < 8; ++l)
      for (index_t d = 0; d < 4; ++d) fused_q(0, h, l, d) = q(0, h, l, d);
  attention(Full{}, TensorView<const float>(fused_q), k, v, fused_out);
  std::vector<float> separate(static_cast<std::size_t>(kElements));
  attention(Full{}, q, k, v, bhld(separate.data(), 1, 2, 8, 4));
  for (index_t h = 0; h < 2; ++h)
    for (index_t l = 0; l < 8; ++l)
      for (index_t d = 0; d < 4; ++d)
        EXPECT_EQ(fused_out(0, h, l, d), separate[static_cast<std::size_t>((h * 8 + l) * 4 + d)]);
  // ... and shifted by one element they share a byte: rejected.
  const TensorView<float> shifted_out(fused.data() + 3, {1, 2, 8, 4}, {2 * 8 * 8, 8 * 8, 8, 1});
  EXPECT_THROW(attention(Full{}, TensorView<const float>(fused_q), k, v, shifted_out), attnkit::invalid_argument);

  // Adjacent, not overlapping: accepted, and the same result as separate buffers.
  TensorView<float> lse_after_out = lse_view(arena.data() + 4 * kElements, 1, 2, 8);
  attention(Full{}, q, k, v, output(3 * kElements), lse_after_out);
  EXPECT_TRUE(std::equal(separate.begin(), separate.end(), arena.begin() + 3 * kElements));
}

TEST(Validation, ViewHelpersRejectNegativeSizesAndOverflow) {
  float x = 0;
  EXPECT_THROW(bhld(&x, 1, -1, 1, 1), attnkit::invalid_argument);
  EXPECT_THROW(blhd(&x, 1, 1, 1, -4), attnkit::invalid_argument);
  const index_t huge = index_t{1} << 40;
  try {
    bhld(&x, huge, huge, 1, 1);
    ADD_FAILURE() << "no exception";
  } catch (const attnkit::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("overflows"), std::string::npos) << error.what();
  }
}

TEST(Validation, BlhdIsAStridedBhldView) {
  std::vector<float> buffer(2 * 3 * 4 * 5);
  const TensorView<float> view = blhd(buffer.data(), 2, 3, 4, 5);  // B=2, L=3, H=4, D=5
  EXPECT_EQ(view.sizes(), (std::array<index_t, 4>{2, 4, 3, 5}));
  // Element (b, h, l, d) of the [B, H, L, D] view is buffer[((b * L + l) * H + h) * D + d].
  EXPECT_EQ(&view(1, 2, 0, 3), &buffer[((1 * 3 + 0) * 4 + 2) * 5 + 3]);
  EXPECT_EQ(&view(0, 3, 2, 4), &buffer[((0 * 3 + 2) * 4 + 3) * 5 + 4]);
}

}  // namespace
}  // namespace attnkit
