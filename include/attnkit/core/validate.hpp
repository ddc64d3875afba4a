#pragma once
// Validation of one attention call: every rule checked before anything is written.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attnkit/core/errors.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"

namespace attnkit::detail {

/// Checks one view on its own: sizes >= 0, head dim >= 1 (`min_dim`), unit last stride,
/// non-null data when it has elements, and no int64 overflow of any element offset.
template <class T>
void validate_view(const char* name, const TensorView<T>& view, index_t min_dim) {
  for (int axis = 0; axis < 4; ++axis) {
    if (view.size(axis) < 0) {
      reject(std::string(name) + ".sizes[" + axis_name(axis) + "]", view.size(axis), "sizes must be >= 0");
    }
  }
  if (view.dim() < min_dim) {
    reject(std::string(name) + ".sizes[dim]", view.dim(), "head dimension must be >= 1");
  }
  if (view.stride(kDim) != 1) {
    reject(std::string(name) + ".strides[dim]", view.stride(kDim), "the last stride must be 1 (rows contiguous)");
  }
  const bool empty = view.batch() == 0 || view.heads() == 0 || view.seq() == 0 || view.dim() == 0;
  if (empty) return;
  if (view.data() == nullptr) {
    reject(std::string(name) + ".data", "nullptr", "data must not be null when the view has elements");
  }
  // The farthest element from data() in either direction must be addressable.
  index_t reach = 0;
  for (int axis = 0; axis < 4; ++axis) {
    index_t step = 0;
    const index_t stride = view.stride(axis);
    if (stride == INT64_MIN || __builtin_mul_overflow(view.size(axis) - 1, stride < 0 ? -stride : stride, &step) ||
        __builtin_add_overflow(reach, step, &reach)) {
      reject(std::string(name) + ".strides[" + axis_name(axis) + "]", stride,
             "element offsets (size - 1) * |stride| summed over axes overflow int64");
    }
  }
  if (__builtin_mul_overflow(reach, static_cast<index_t>(sizeof(T)), &reach)) {
    reject(std::string(name), "extent", "byte offsets overflow int64");
  }
}

/// The bytes a validated view's elements span, from its lowest to one past its highest element
/// address (an empty view spans nothing).
struct ByteSpan {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  bool empty() const { return begin == end; }
};

template <class T>
ByteSpan byte_span(const TensorView<T>& view) {
  for (int axis = 0; axis < 4; ++axis) {
    if (view.size(axis) == 0) return {};
  }
  // validate_view has checked that these offsets fit in int64.
  index_t lowest = 0;
  index_t highest = 0;
  for (int axis = 0; axis < 4; ++axis) {
    const index_t offset = (view.size(axis) - 1) * view.stride(axis);
    (offset < 0 ? lowest : highest) += offset;
  }
  const auto base = reinterpret_cast<std::uintptr_t>(view.data());
  constexpr auto element = static_cast<std::uintptr_t>(sizeof(T));
  return {base - static_cast<std::uintptr_t>(-lowest) * element,
          base + static_cast<std::uintptr_t>(highest) * element + element};
}

/// The rows (b, h, l) of a validated view as byte ranges, sorted by start and merged where
/// they touch. O(rows log rows).
template <class T>
std::vector<ByteSpan> row_spans(const TensorView<T>& view) {
  std::vector<ByteSpan> rows;
  rows.reserve(static_cast<std::size_t>(view.batch() * view.heads() * view.seq()));
  const auto row_bytes = static_cast<std::uintptr_t>(view.dim()) * sizeof(T);
  for (index_t b = 0; b < view.batch(); ++b)
    for (index_t h = 0; h < view.heads(); ++h)
      for (index_t l = 0; l < view.seq(); ++l) {
        const auto begin = reinterpret_cast<std::uintptr_t>(view.row(b, h, l));
        rows.push_back({begin, begin + row_bytes});
      }
  std::sort(rows.begin(), rows.end(), [](const ByteSpan& x, const ByteSpan& y) { return x.begin < y.begin; });
  std::vector<ByteSpan> merged;
  for (const ByteSpan& row : rows) {
    if (!merged.empty() && row.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, row.end);
    } else {
      merged.push_back(row);
    }
  }
  return merged;
}

/// An output must not share memory with another argument: the kernels read q, k and v while
/// out is written, so a shared byte would feed results back as inputs. Views whose address
/// ranges are apart (the usual case) cost O(1); views interleaved in one buffer (a fused qkv
/// tensor with out beside it, heads of several tensors in one mapping) are compared row by
/// row, exactly, in O(rows log rows).
template <class Output, class Other>
void reject_overlap(const char* output_name, const TensorView<Output>& output, const char* other_name,
                    const TensorView<Other>& other) {
  const ByteSpan a = byte_span(output);
  const ByteSpan b = byte_span(other);
  if (a.empty() || b.empty() || a.end <= b.begin || b.end <= a.begin) return;
  const std::vector<ByteSpan> output_rows = row_spans(output), other_rows = row_spans(other);
  for (std::size_t i = 0, j = 0; i < output_rows.size() && j < other_rows.size();) {
    if (output_rows[i].end <= other_rows[j].begin) {
      ++i;
    } else if (other_rows[j].end <= output_rows[i].begin) {
      ++j;
    } else {
      reject(std::string(output_name) + ".data", static_cast<const void*>(output.data()),
             std::string(output_name) + " must not overlap " + other_name + " (they share memory)");
    }
  }
}

template <class T>
void require_size(const char* name, const TensorView<T>& view, int axis, index_t expected, const char* rule) {
  if (view.size(axis) != expected) {
    reject(std::string(name) + ".sizes[" + axis_name(axis) + "]", view.size(axis), rule);
  }
}

/// `view` has the sizes of `other`, axis by axis (GlobalProjections' Qg, Kg, Vg against q, k, v).
template <class T>
void require_same_sizes(const char* name, const TensorView<T>& view, const char* other_name,
                        const TensorView<T>& other) {
  for (int axis = 0; axis < 4; ++axis) {
    if (view.size(axis) != other.size(axis)) {
      reject(std::string(name) + ".sizes[" + axis_name(axis) + "]", view.size(axis),
             "must equal " + std::string(other_name) + ".sizes[" + axis_name(axis) +
                 "] = " + std::to_string(other.size(axis)));
    }
  }
}

/// lse [B, Hq, Lq, 1] for q [B, Hq, Lq, D] (both front doors).
template <class Lse>
void validate_lse(const TensorView<Lse>& lse, index_t batch, index_t q_heads, index_t q_len) {
  validate_view("lse", lse, 1);
  require_size("lse", lse, kBatch, batch, "must equal q.sizes[batch]");
  require_size("lse", lse, kHeads, q_heads, "must equal q.sizes[heads]");
  require_size("lse", lse, kSeq, q_len, "must equal q.sizes[seq]");
  require_size("lse", lse, kDim, 1, "must be 1 (one log-sum-exp per row)");
}

/// Options::scale finite, Options::threads >= 0 (both front doors).
inline void validate_scale_and_threads(const Options& options) {
  if (options.scale && !std::isfinite(*options.scale)) {
    reject("options.scale", *options.scale, "must be finite");
  }
  if (options.threads < 0) {
    reject("options.threads", options.threads, "must be >= 0 (0 = OpenMP default)");
  }
}

/// Validates the views q [B,Hq,Lq,D], k [B,Hk,Lk,D], v [B,Hk,Lk,Dv] and returns the call's
/// shape (the forward and backward calls).
template <class Q, class K, class V>
AttentionShape validate_inputs(const TensorView<Q>& q, const TensorView<K>& k, const TensorView<V>& v) {
  validate_view("q", q, 1);
  validate_view("k", k, 1);
  validate_view("v", v, 1);
  const AttentionShape shape{q.batch(), q.heads(), k.heads(), q.seq(), k.seq(), q.dim(), v.dim()};
  require_size("k", k, kBatch, shape.batch, "must equal q.sizes[batch]");
  require_size("k", k, kDim, shape.head_dim, "must equal q.sizes[dim] (queries and keys share D)");
  if (shape.kv_heads == 0 ? shape.q_heads != 0 : shape.q_heads % shape.kv_heads != 0) {
    reject("k.sizes[heads]", shape.kv_heads,
           "q.sizes[heads] (" + std::to_string(shape.q_heads) + ") must be a multiple of k.sizes[heads]");
  }
  require_size("v", v, kBatch, shape.batch, "must equal q.sizes[batch]");
  require_size("v", v, kHeads, shape.kv_heads, "must equal k.sizes[heads]");
  require_size("v", v, kSeq, shape.kv_len, "must equal k.sizes[seq]");
  return shape;
}

/// A view of the output's shape [B,Hq,Lq,Dv] (out, or the backward's d_out), named `name`.
template <class Output>
void validate_output(const char* name, const TensorView<Output>& out, const AttentionShape& shape) {
  validate_view(name, out, 1);
  require_size(name, out, kBatch, shape.batch, "must equal q.sizes[batch]");
  require_size(name, out, kHeads, shape.q_heads, "must equal q.sizes[heads]");
  require_size(name, out, kSeq, shape.q_len, "must equal q.sizes[seq]");
  require_size(name, out, kDim, shape.value_dim, "must equal v.sizes[dim]");
}

/// Validates q [B,Hq,Lq,D], k [B,Hk,Lk,D], v [B,Hk,Lk,Dv], out [B,Hq,Lq,Dv], optional
/// lse [B,Hq,Lq,1] and the options, and that out and lse overlap no other argument; returns
/// the call's shape. Throws attnkit::invalid_argument
/// naming the first broken rule. (Element types are checked at compile time by the front door.)
template <class T, class Output = T, class Lse = T>
AttentionShape validate_call(const TensorView<const T>& q, const TensorView<const T>& k, const TensorView<const T>& v,
                             const TensorView<Output>& out, const TensorView<Lse>* lse, const Options& options) {
  const AttentionShape shape = validate_inputs(q, k, v);
  validate_output("out", out, shape);
  if (lse != nullptr) validate_lse(*lse, shape.batch, shape.q_heads, shape.q_len);
  reject_overlap("out", out, "q", q);
  reject_overlap("out", out, "k", k);
  reject_overlap("out", out, "v", v);
  if (lse != nullptr) {
    reject_overlap("lse", *lse, "q", q);
    reject_overlap("lse", *lse, "k", k);
    reject_overlap("lse", *lse, "v", v);
    reject_overlap("lse", *lse, "out", out);
  }
  if (options.quantized_query) {
    reject("options.quantized_query", "true",
           "applies to attention over a q8_0_block KV cache (SPEC.md section 13), not to a call on tensors");
  }
  validate_scale_and_threads(options);
  return shape;
}

/// Offsets of packed rows (flash-attn's cu_seqlens): `entries` of them (the batch + 1;
/// `entries_rule` says why), from 0 to `total` (`total_name`, the packed extent), never
/// decreasing. `name` is how messages name them.
inline void validate_offsets(const std::string& name, std::span<const index_t> offsets, index_t entries,
                             const std::string& entries_rule, index_t total, const std::string& total_name) {
  if (static_cast<index_t>(offsets.size()) != entries) {
    reject(name + ".size()", offsets.size(), "must be " + entries_rule + " = " + std::to_string(entries));
  }
  if (offsets.empty()) return;
  if (offsets.front() != 0) reject(name + "[0]", offsets.front(), "must be 0");
  for (std::size_t b = 1; b < offsets.size(); ++b) {
    if (offsets[b] < offsets[b - 1]) {
      reject(name + "[" + std::to_string(b) + "]", offsets[b],
             "must be >= " + name + "[" + std::to_string(b - 1) + "] = " + std::to_string(offsets[b - 1]));
    }
  }
  if (offsets.back() != total) {
    reject(name + "[" + std::to_string(offsets.size() - 1) + "]", offsets.back(),
           "must equal " + total_name + " = " + std::to_string(total) + " (the packed rows)");
  }
}

/// Options::key_lengths: empty, or one length per batch element in [0, Lk], and only for a
/// pattern that honours it (`accepted`: KeyPaddedPattern).
inline void validate_key_lengths(bool accepted, const Options& options, const AttentionShape& shape) {
  const std::vector<index_t>& lengths = options.key_lengths;
  if (lengths.empty()) return;
  if (!accepted) {
    reject("options.key_lengths.size()", lengths.size(),
           "this pattern does not take key padding (leave key_lengths empty; Linformer takes it)");
  }
  if (static_cast<index_t>(lengths.size()) != shape.batch) {
    reject("options.key_lengths.size()", lengths.size(),
           "must equal q.sizes[batch] (" + std::to_string(shape.batch) + "): one valid key length per batch element");
  }
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    if (lengths[b] < 0 || lengths[b] > shape.kv_len) {
      reject("options.key_lengths[" + std::to_string(b) + "]", lengths[b],
             "must lie in [0, k.sizes[seq]] = [0, " + std::to_string(shape.kv_len) + "]");
    }
  }
}

/// sigma of SPEC.md section 0: options.scale, or 1/sqrt(D).
inline double resolve_scale(const Options& options, index_t head_dim) {
  return options.scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
}
inline double resolve_scale(const Options& options, const AttentionShape& shape) {
  return resolve_scale(options, shape.head_dim);
}

}  // namespace attnkit::detail
