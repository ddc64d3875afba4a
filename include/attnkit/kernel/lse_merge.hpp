#pragma once
// kernel::merge_partial: a row's partial softmax results combined by their log-sum-exp, one at
// a time (SPEC.md section 0; LSH rounds, results computed over disjoint or repeated key sets).

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnkit/core/index.hpp"

namespace attnkit::kernel {

/// Folds one partial result (row, row_lse) into the running result (out, out_lse) of the same
/// query, both of the form rows = sum_j w_j v_j / sum_j w_j over their keys, lse = ln sum_j w_j:
///   L = logaddexp(out_lse, row_lse),  out = exp(out_lse - L) out + exp(row_lse - L) row,
/// and returns L. Folding parts k = 0, 1, ... into (anything, -inf) gives one softmax over the
/// union (a multiset) of their keys, in an order fixed by the caller. A part with lse = -inf
/// (no key) changes nothing and its row is not read; a running result with -inf is replaced
/// (its row is not read either), so an all-empty sequence leaves out untouched: callers start
/// from zeros when they want zeros for it. Never NaN from -inf.
template <class T>
T merge_partial(T* out, T out_lse, const T* row, T row_lse, index_t dim) {
  constexpr T kMinusInf = -std::numeric_limits<T>::infinity();
  if (row_lse == kMinusInf) return out_lse;
  if (out_lse == kMinusInf) {
    std::copy(row, row + dim, out);
    return row_lse;
  }
  const T top = std::max(out_lse, row_lse);
  const T out_weight = std::exp(out_lse - top), row_weight = std::exp(row_lse - top);  // one of them is 1
  const T total = out_weight + row_weight;
  const T out_share = out_weight / total, row_share = row_weight / total;
  for (index_t d = 0; d < dim; ++d) out[d] = out_share * out[d] + row_share * row[d];
  return top + std::log(total);
}

}  // namespace attnkit::kernel
