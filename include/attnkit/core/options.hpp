#pragma once
// attnkit::Options: per-call knobs that are not part of the pattern.

#include <optional>
#include <vector>

#include "attnkit/core/index.hpp"

namespace attnkit {

struct Options {
  /// Logit scale sigma in s_ij = sigma <q_i, k_j> (SPEC.md section 0). Unset means
  /// 1/sqrt(D). Must be finite when set. Reformer-style callers pass 1; callers that
  /// pre-scale Q pass 1 as well.
  std::optional<double> scale = std::nullopt;

  /// OpenMP threads for this call; 0 means omp_get_max_threads(). Calls too small to
  /// repay a thread team run on the calling thread. Results are bitwise identical for every
  /// thread count: each output row is computed by one thread in a fixed order.
  int threads = 0;

  /// Key padding: empty (every key is valid), or one length per batch element, 0 <= len <= Lk;
  /// keys j >= key_lengths[b] of batch element b are padding and never read. Only patterns
  /// that declare KeyPaddedPattern accept it (Linformer: padded K/V rows count as zero rows
  /// in the projection, SPEC.md section 8); others throw attnkit::invalid_argument.
  std::vector<index_t> key_lengths = {};

  /// Logit soft-capping (Gemma 2, SPEC.md section 14): each attended score s becomes
  /// softcap * tanh(s / softcap). 0 is off; otherwise finite and > 0.
  double softcap = 0;

  /// ALiBi (Press et al. 2022, SPEC.md section 14): empty (off), or one slope per query head
  /// (Hq, also under grouped-query attention); each attended score loses m_h |p - j| for query
  /// position p and key j (attnkit::alibi_slopes(Hq) gives the standard slopes). After the cap.
  /// Both modifiers apply to the kinds the tiled driver runs (every mask kind and combination),
  /// in prefill and over caches; Linformer, LSH, kernelized RPE and global projections reject them.
  std::vector<double> alibi_slopes = {};

  /// The 8-bit query mode of attention over a q8_0_block KV cache (SPEC.md section 13,
  /// ggml/llama.cpp's semantics of an 8-bit cache): each query row is quantized to 8-bit blocks
  /// with the cache's rule and the scores are integer dot products times the two blocks'
  /// scales, so the result differs from the exact mode's by the query's rounding (up to 1/254
  /// of each block's largest |q|). Off (exact float scores) by default; over another cache type,
  /// or in a call on tensors, an invalid_argument.
  bool quantized_query = false;
};

}  // namespace attnkit
