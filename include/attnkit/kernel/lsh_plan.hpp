#pragma once
// kernel::LshPlan: the executable plan of attnkit::Lsh (SPEC.md section 7): hashing, sorting,
// then one pass of the tiled driver per (batch, head, round) over the sorted occurrences.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "attnkit/core/call.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/kernel/lse_merge.hpp"
#include "attnkit/kernel/lsh_hashing.hpp"
#include "attnkit/kernel/tiled_driver.hpp"
#include "attnkit/parallel/team.hpp"

namespace attnkit::kernel {

/// The logit added to a key at the query's own position (SPEC.md step 4): finite, so a row
/// attends itself when nothing else is there.
inline constexpr double kLshSelfPenalty = -1e5;

/// The sorted sequence of one call. Each round's n occurrences, sorted by (bucket, row), fill
/// `chunks` chunks of `chunk` slots, the last padded past n with slots that hold no row; the
/// rounds follow each other, R chunks chunk slots in all. The slot at t of the sequence
/// attends the chunks before ... after of its own, counted circularly over all R chunks
/// chunks (a chunk met twice when there are fewer than window() chunks counts twice).
/// Under SPEC.md's n <= c rule: one round, one chunk of n rows in their own order, and a
/// window of that chunk alone (full attention with the self penalty).
struct LshGeometry {
  index_t n = 0;
  index_t chunk = 1;
  index_t chunks = 0;  // per round
  index_t rounds = 1;
  index_t before = 0;
  index_t after = 0;
  bool causal = false;
  bool hashed = true;  // false under the n <= c rule

  static LshGeometry of(index_t n, index_t chunk, index_t rounds, index_t before, index_t after, bool causal) {
    if (n <= chunk) return LshGeometry{n, std::max<index_t>(n, 1), n > 0 ? 1 : 0, 1, 0, 0, causal, false};
    return LshGeometry{n, chunk, attnkit::detail::ceil_div(n, chunk), rounds, before, after, causal, true};
  }
  index_t padded() const { return chunks * chunk; }  // slots per round
  index_t window() const { return before + 1 + after; }
  /// Slot pairs one occurrence scores: its window's slots (padding included).
  index_t window_slots() const { return window() * chunk; }
};

/// One round of one (batch, head) as the tiled driver sees it (a PositionedPlan,
/// SharedQueryKeyPlan, BiasedPlan and SinkingPlan). Query positions are the round's n
/// occurrences (its first n slots); key positions are the slots its windows reach: the
/// before chunks preceding the round, its own chunks, and the after chunks following it,
/// circularly, so the window of the round's chunk l is key positions [l c, (l + window) c)
/// and a chunk reached twice appears twice.
///   order: the call's sorted sequence, R * padded slots (a row, or kPaddingSlot);
///   key_slots: key_positions() entries, filled by fill_key_slots();
///   norms, inverse_norms: ||x_i|| and 1 / ||x_i|| per row: keys are x's rows normalised as
///   they are packed, and queries those keys read back and scaled by the norm;
///   results go to out (row i at out + i * out_stride) and lse, the first round's copied,
///   later rounds' folded in by merge_partial.
template <class T>
class LshRoundPlan {
 public:
  struct Sink {
    T* out;
    index_t out_stride;
    T* lse;
    index_t lse_stride;
    index_t value_dim;
  };

  LshRoundPlan() = default;
  LshRoundPlan(const LshGeometry& geometry, index_t round, const std::int32_t* order, std::int32_t* key_slots,
               const T* norms, const T* inverse_norms, const TileShape& tiles, const Sink& sink)
      : g_(geometry),
        round_(round),
        queries_(order + round * geometry.padded()),
        order_(order),
        key_slots_(key_slots),
        norms_(norms),
        inverse_norms_(inverse_norms),
        key_rows_(tiles.key_rows),
        sink_(sink) {}

  /// key_slots[p]: the slot sequence's entry behind key position p.
  void fill_key_slots() const {
    const index_t all_chunks = g_.rounds * g_.chunks;
    const index_t first = round_ * g_.chunks - g_.before;
    for (index_t kc = 0; kc < g_.chunks + g_.before + g_.after; ++kc) {
      const index_t chunk = ((first + kc) % all_chunks + all_chunks) % all_chunks;
      std::copy(order_ + chunk * g_.chunk, order_ + (chunk + 1) * g_.chunk, key_slots_ + kc * g_.chunk);
    }
  }

  index_t query_positions() const { return g_.n; }
  index_t key_positions() const { return (g_.chunks + g_.before + g_.after) * g_.chunk; }
  index_t query_row(index_t /*head*/, index_t position) const { return queries_[position]; }
  index_t key_row(index_t /*head*/, index_t position) const {
    const std::int32_t row = key_slots_[position];
    return row == kPaddingSlot ? 0 : row;  // padding packs row 0's key, never attended
  }
  index_t key_order(index_t /*head*/) const { return 0; }
  T key_scale(index_t /*head*/, index_t position) const {
    const std::int32_t row = key_slots_[position];
    return row == kPaddingSlot ? T(0) : inverse_norms_[row];
  }
  /// The round's occurrences are its own chunks' slots, which follow the before chunks.
  index_t query_key_offset(index_t /*head*/) const { return g_.before * g_.chunk; }
  T query_scale(index_t /*head*/, index_t position) const { return norms_[queries_[position]]; }

  /// The windows of query positions [q_begin, q_end) as one key range, split at panel
  /// boundaries, so the window's chunks share one score tile and one pass of the value
  /// accumulation (separate chunk tiles ran 10% slower). A piece needs the mask when one of
  /// its chunks does: when some query of the range does not have it in its window (a range
  /// straddling two chunks), when it may hold the query's own row (its own chunk, or any chunk
  /// of another round: the self penalty), when it holds padding, and always when causal (rows
  /// in sorted order are not in position order).
  template <class Visit>
  void for_each_key_tile(index_t /*head*/, index_t q_begin, index_t q_end, Visit&& visit) const {
    const index_t first = q_begin / g_.chunk, last = (q_end - 1) / g_.chunk;
    const index_t end = (last + g_.window()) * g_.chunk;
    for (index_t begin = first * g_.chunk; begin < end;) {
      const index_t stop = std::min(end, (begin / key_rows_ + 1) * key_rows_);
      bool needs_mask = g_.causal;
      for (index_t kc = begin / g_.chunk; kc <= (stop - 1) / g_.chunk && !needs_mask; ++kc) {
        needs_mask = kc < last || kc >= first + g_.window() || may_hold_row_or_padding(kc, first, last);
      }
      visit(KeyTile{begin, stop, needs_mask});
      begin = stop;
    }
  }

  /// Excludes keys outside the query's window, padding slots, and (causal) rows after the
  /// query's row; selection only.
  template <class S>
  void exclude(index_t /*head*/, index_t position, const KeyTile& tile, S* scores) const {
    constexpr S kExcluded = -std::numeric_limits<S>::infinity();
    const index_t window_begin = position / g_.chunk * g_.chunk;
    const index_t lo = std::clamp(window_begin, tile.begin, tile.end);
    const index_t hi = std::clamp(window_begin + g_.window_slots(), tile.begin, tile.end);
    std::fill(scores, scores + (lo - tile.begin), kExcluded);
    std::fill(scores + (hi - tile.begin), scores + (tile.end - tile.begin), kExcluded);
    // Padding is kPaddingSlot, above every row: one comparison covers padding and causality.
    const std::int32_t last_attended = g_.causal ? queries_[position] : kPaddingSlot - 1;
    const std::int32_t* rows = key_slots_ + tile.begin;
    for (index_t c = lo - tile.begin; c < hi - tile.begin; ++c) scores[c] = rows[c] > last_attended ? kExcluded : scores[c];
  }

  /// The self penalty on keys at the query's own row.
  template <class S>
  void add_bias(index_t /*head*/, index_t position, const KeyTile& tile, S* scores, S unit) const {
    const S penalty = unit * static_cast<S>(kLshSelfPenalty);
    const std::int32_t self = queries_[position];
    const std::int32_t* rows = key_slots_ + tile.begin;
    for (index_t c = 0; c < tile.end - tile.begin; ++c) scores[c] += rows[c] == self ? penalty : S(0);
  }

  void sink(index_t /*b*/, index_t /*h*/, index_t position, const T* row, T lse) const {
    const index_t i = queries_[position];
    T* out = sink_.out + i * sink_.out_stride;
    T* running = sink_.lse + i * sink_.lse_stride;
    if (round_ == 0) {
      std::copy(row, row + sink_.value_dim, out);
      *running = lse;
    } else {
      *running = merge_partial(out, *running, row, lse, sink_.value_dim);
    }
  }

 private:
  /// Whether pass key chunk kc may hold padding or the row of a query in round chunks
  /// [first, last].
  bool may_hold_row_or_padding(index_t kc, index_t first, index_t last) const {
    const index_t all_chunks = g_.rounds * g_.chunks;
    const index_t chunk = ((round_ * g_.chunks - g_.before + kc) % all_chunks + all_chunks) % all_chunks;
    const bool padding = chunk % g_.chunks == g_.chunks - 1 && g_.padded() != g_.n;
    const bool other_round = chunk / g_.chunks != round_;
    const index_t local = chunk - round_ * g_.chunks;
    return padding || other_round || (local >= first && local <= last);
  }

  LshGeometry g_;
  index_t round_ = 0;
  const std::int32_t* queries_ = nullptr;  // the round's slots
  const std::int32_t* order_ = nullptr;
  std::int32_t* key_slots_ = nullptr;
  const T* norms_ = nullptr;
  const T* inverse_norms_ = nullptr;
  index_t key_rows_ = 1;
  Sink sink_{};
};

/// Wall time of each phase of one LSH call, in seconds, summed over (batch, head) (the
/// benchmarks' split; timing adds one barrier per phase). Attention includes the streamed
/// merge of rounds in the driver's sink.
struct LshPhaseTimes {
  double hashing = 0;  // rotations, GEMM, argmax, key norms
  double sorting = 0;
  double attention = 0;
};

/// Runs one LSH call in one parallel region. Per (batch, head): the team hashes the rows and
/// takes their norms (blocks of kHashRows), sorts each round (one round per item), then for
/// each round the leader builds that round's plan and TiledPass (the leader, so the K/V
/// panels stay in one thread's scratch) and the team runs it. Every row's rounds are merged in
/// round order, every output row is computed by one thread in a fixed order: results do not
/// depend on the thread count.
/// Extra memory (T = float, n = 65536, R = 8, D = Dv = 64): panels (n + 2 chunks) (D + Dv)
/// elements (32 MiB), ids and sorted order R n int32 each (2 + 2 MiB), 2 n norms, the
/// rotations, and without a requested lse a running lse of n.
template <class T>
class LshPlan {
 public:
  LshPlan(const LshGeometry& geometry, LshBucketLayout layout, const LshRotationSource& rotations, const TileShape& tiles)
      : g_(geometry), layout_(std::move(layout)), rotations_(rotations), tiles_(tiles) {}

  void execute(const AttentionCall<T>& call) const { execute(call, nullptr); }

  void execute(const AttentionCall<T>& call, LshPhaseTimes* times) const {
    const AttentionShape& shape = call.shape;
    const index_t n = shape.q_len, dim = shape.head_dim, heads = shape.q_heads;
    if (n == 0 || shape.batch == 0 || heads == 0) return;
    const index_t slots = g_.rounds * g_.padded();
    LshHasher<T> hasher(rotations_, layout_, g_.hashed ? heads : 0, dim, g_.rounds);
    std::vector<index_t> counts(static_cast<std::size_t>(g_.hashed ? g_.rounds * (layout_.buckets + 1) : 0));
    std::vector<std::int32_t> key_slots(static_cast<std::size_t>((g_.chunks + g_.before + g_.after) * g_.chunk));
    std::int32_t* ids = attnkit::detail::thread_scratch<struct LshIdsTag, std::int32_t>(g_.rounds * n);
    std::int32_t* order = attnkit::detail::thread_scratch<struct LshOrderTag, std::int32_t>(slots);
    T* norms = attnkit::detail::thread_scratch<struct LshNormsTag, T>(n);
    T* norms_inverse = attnkit::detail::thread_scratch<struct LshInverseNormsTag, T>(n);
    T* running_lse = call.lse == nullptr ? attnkit::detail::thread_scratch<struct LshRunningLseTag, T>(n) : nullptr;
    if (!g_.hashed) {
      for (index_t i = 0; i < n; ++i) order[i] = static_cast<std::int32_t>(i);
    }
    const AttentionShape head_shape{1, 1, 1, n, n, dim, shape.value_dim};
    const index_t blocks = LshHasher<T>::blocks(n);

    LshRoundPlan<T> round_plan;
    std::optional<TiledPass<T, LshRoundPlan<T>>> pass;
    auto clock = std::chrono::steady_clock::now();
    parallel::parallel_region(call.threads, [&](parallel::Team& team) {
      const auto mark = [&](double LshPhaseTimes::*phase) {
        if (times == nullptr) return;
        team.leader([&] {
          const auto now = std::chrono::steady_clock::now();
          times->*phase += std::chrono::duration<double>(now - clock).count();
          clock = now;
        });
      };
      hasher.fill(team);
      for (index_t b = 0; b < shape.batch; ++b) {
        for (index_t h = 0; h < heads; ++h) {
          const T* x = call.q.row(b, h, 0);
          const index_t x_stride = call.q.stride(kSeq);
          team.for_each_static(blocks, [&](index_t block) {
            if (g_.hashed) hasher.hash_block(x, x_stride, n, h, block, ids);
            const index_t first = block * kHashRows;
            row_norms<T>(x, x_stride, first, std::min(n, first + kHashRows), dim, norms, norms_inverse);
          });
          mark(&LshPhaseTimes::hashing);
          if (g_.hashed) {
            team.for_each_static(g_.rounds, [&](index_t r) {
              sort_round(ids + r * n, n, g_.padded(), layout_.buckets, order + r * g_.padded(),
                         counts.data() + r * (layout_.buckets + 1));
            });
          }
          mark(&LshPhaseTimes::sorting);
          const TensorView<const T> head_x(x, {1, 1, n, dim}, call.q.strides());
          const AttentionCall<T> head_call{head_shape,
                                           head_x,
                                           head_x,
                                           TensorView<const T>(call.v.row(b, h, 0), {1, 1, n, shape.value_dim}, call.v.strides()),
                                           TensorView<T>(call.out.row(b, h, 0), {1, 1, n, shape.value_dim}, call.out.strides()),
                                           nullptr,
                                           call.scale,
                                           call.threads};
          const typename LshRoundPlan<T>::Sink sink{
              call.out.row(b, h, 0), call.out.stride(kSeq), call.lse != nullptr ? call.lse->row(b, h, 0) : running_lse,
              call.lse != nullptr ? call.lse->stride(kSeq) : 1, shape.value_dim};
          for (index_t r = 0; r < g_.rounds; ++r) {
            team.leader([&] {
              pass.reset();
              round_plan = LshRoundPlan<T>(g_, r, order, key_slots.data(), norms, norms_inverse, tiles_, sink);
              round_plan.fill_key_slots();
              pass.emplace(head_call, round_plan, tiles_);
            });
            pass->run(team);
          }
          mark(&LshPhaseTimes::attention);
        }
      }
    });
  }

 private:
  LshGeometry g_;
  LshBucketLayout layout_;
  LshRotationSource rotations_;
  TileShape tiles_;
};

}  // namespace attnkit::kernel
