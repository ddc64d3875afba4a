#pragma once
// kernel::merge_partials: one row's partial softmax results combined by their log-sum-exp
// (SPEC.md section 0; LSH rounds, results computed over disjoint or repeated key sets).

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnkit/core/index.hpp"

namespace attnkit::kernel {

/// Given `count` partial results of one row, partial k = (rows[k] of `dim` elements, lses[k])
/// with rows[k] = sum_j w_j v_j / sum_j w_j over its keys and lses[k] = ln sum_j w_j, writes
///   L = ln sum_k exp(lses[k]),   out = sum_k exp(lses[k] - L) rows[k]
/// and returns L: the result of one softmax over the union (a multiset) of the parts' keys.
/// Parts with lse = -inf (no key) contribute nothing; when every part is empty, out = 0 and
/// L = -inf, never NaN. The parts are added in order k = 0, 1, ..., so the result depends
/// only on the inputs. rows(k) returns a pointer to part k's row.
template <class T, class Rows>
T merge_partials(index_t count, Rows&& rows, const T* lses, index_t dim, T* out) {
  constexpr T kMinusInf = -std::numeric_limits<T>::infinity();
  T top = kMinusInf;
  for (index_t k = 0; k < count; ++k) top = std::max(top, lses[k]);
  std::fill(out, out + dim, T(0));
  if (top == kMinusInf) return kMinusInf;
  T total = 0;
  for (index_t k = 0; k < count; ++k) {
    if (lses[k] == kMinusInf) continue;  // empty part: its row is not read
    const T weight = std::exp(lses[k] - top);
    total += weight;
    const T* row = rows(k);
    for (index_t d = 0; d < dim; ++d) out[d] += weight * row[d];
  }
  const T inverse = T(1) / total;
  for (index_t d = 0; d < dim; ++d) out[d] *= inverse;
  return top + std::log(total);
}

}  // namespace attnkit::kernel
