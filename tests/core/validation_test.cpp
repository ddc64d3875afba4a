// Every bad-input rule throws attnkit::invalid_argument naming argument, value and rule, and
// leaves the output untouched.

#include <gtest/gtest.h>

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
