#pragma once
// kernel::LshPlan: the executable plan of attnkit::Lsh (SPEC.md section 7): hashing, sorting,
// then one pass of the tiled driver per (batch, head, round) over the sorted occurrences.

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "attnkit/core/call.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/core/tensor_view.hpp"
#include "attnkit/detail/thread_scratch.hpp"
#include "attnkit/kernel/key_value_panels.hpp"
#include "attnkit/kernel/lse_merge.hpp"
#include "attnkit/kernel/lsh_hashing.hpp"
#include "attnkit/kernel/tiled_driver.hpp"
#include "attnkit/parallel/team.hpp"
#include "attnkit/simd/convert.hpp"
#include "attnkit/simd/prefetch.hpp"

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
  bool hashed = true;        // false under the n <= c rule
  double key_epsilon = 0.0;  // keys x / sqrt(||x||^2 + D key_epsilon)

  static LshGeometry of(index_t n, index_t chunk, index_t rounds, index_t before, index_t after, bool causal,
                        double key_epsilon) {
    if (n <= chunk) return LshGeometry{n, std::max<index_t>(n, 1), n > 0 ? 1 : 0, 1, 0, 0, causal, false, key_epsilon};
    return LshGeometry{n, chunk, attnkit::detail::ceil_div(n, chunk), rounds, before, after, causal, true, key_epsilon};
  }
  index_t padded() const { return chunks * chunk; }  // slots per round
  index_t window() const { return before + 1 + after; }
  /// Slot pairs one occurrence scores: its window's slots (padding included).
  index_t window_slots() const { return window() * chunk; }
};

/// The window of one query chunk of one round as the tiled driver's query-tile step sees it
/// (an OccurrencePlan, SharedQueryKeyPlan and BiasedPlan). Query positions are
/// the chunk's occurrences (its slots holding a row); key positions are its window's
/// window() chunks of slots, the before chunks preceding it to the after chunks following it,
/// counted circularly over the whole sequence (a chunk reached twice appears twice). The
/// window's chunks sit in a ring of window() chunks of key positions: round key chunk kc (the
/// window of chunk l holds kc = l ... l + window() - 1) at ring slot kc mod window(), so the
/// next chunk's window differs in one slot, the one its entering chunk replaces, and a thread
/// walking consecutive chunks packs one chunk per window. The order of keys inside a softmax
/// is a function of the chunk alone, so results do not depend on who packed what.
///   order: the call's sorted sequence, R * padded slots (a row, or kPaddingSlot);
///   window_slots: the ring's window() c slots, filled by fill_window_slots();
///   norms, inverse_norms: ||x_i|| and 1 / ||x_i|| per row: keys are x's rows normalised as
///   they are packed, and queries those keys read back and scaled by the norm;
///   results go to out (row i at out + i * out_stride) and lse, the first round's copied,
///   later rounds' folded in by merge_partial.
template <class T>
class LshWindowPlan {
 public:
  using value_type = T;  // the element type of the rows it sinks
  struct Sink {
    T* out;
    index_t out_stride;
    T* lse;
    index_t lse_stride;
    index_t value_dim;
  };

  LshWindowPlan() = default;
  LshWindowPlan(const LshGeometry& geometry, index_t round, index_t chunk, const std::int32_t* order,
                std::int32_t* window_slots, const T* norms, const T* inverse_norms, const TileShape& tiles,
                const Sink& sink)
      : g_(geometry),
        round_(round),
        chunk_(chunk),
        queries_(order + round * geometry.padded() + chunk * geometry.chunk),
        order_(order),
        window_slots_(window_slots),
        norms_(norms),
        inverse_norms_(inverse_norms),
        key_rows_(tiles.key_rows),
        sink_(sink) {}

  /// window_slots[p]: the sequence's slot behind key position p.
  void fill_window_slots() const {
    for (index_t w = 0; w < g_.window(); ++w) {
      const index_t chunk = sequence_chunk(w);
      std::copy(order_ + chunk * g_.chunk, order_ + (chunk + 1) * g_.chunk, window_slots_ + ring_slot(w) * g_.chunk);
    }
  }
  /// The key positions of the chunk entering with this window (its last), the only ones the
  /// previous chunk's window does not hold at the same positions.
  KeyRange entering_positions() const {
    const index_t first = ring_slot(g_.window() - 1) * g_.chunk;
    return KeyRange{first, first + g_.chunk};
  }

  /// Asks the caches for the rows this window reads and writes at random (sorted rows come
  /// from anywhere in x, V and out): the x and V rows of the chunk entering the window last
  /// (the others were the previous window's, read just before) and its queries' output rows
  /// and running lse. Issued one window ahead, so they arrive while that window computes.
  template <class S>
  void prefetch_rows(const S* x, index_t x_stride, index_t dim, const S* v, index_t v_stride) const {
    const std::int32_t* entering = order_ + sequence_chunk(g_.window() - 1) * g_.chunk;
    for (index_t s = 0; s < g_.chunk; ++s) {
      if (entering[s] == kPaddingSlot) continue;
      simd::prefetch_row(x + entering[s] * x_stride, dim, false);
      simd::prefetch_row(v + entering[s] * v_stride, sink_.value_dim, false);
    }
    for (index_t q = 0; q < query_positions(); ++q) {
      simd::prefetch_row(sink_.out + queries_[q] * sink_.out_stride, sink_.value_dim, true);
      simd::prefetch_row(sink_.lse + queries_[q] * sink_.lse_stride, 1, true);
    }
  }

  /// The chunk's occurrences: all its slots but the last chunk's padding.
  index_t query_positions() const { return std::min(g_.chunk, g_.n - chunk_ * g_.chunk); }
  index_t key_positions() const { return g_.window_slots(); }
  index_t query_row(index_t /*head*/, index_t position) const { return queries_[position]; }
  index_t key_row(index_t /*head*/, index_t position) const {
    const std::int32_t row = window_slots_[position];
    return row == kPaddingSlot ? 0 : row;  // padding packs row 0's key, never attended
  }
  index_t key_order(index_t /*head*/) const { return 0; }
  T key_scale(index_t /*head*/, index_t position) const {
    const std::int32_t row = window_slots_[position];
    return row == kPaddingSlot ? T(0) : inverse_norms_[row];
  }
  /// The chunk's own slots: window chunk `before`.
  index_t query_key_offset(index_t /*head*/) const { return ring_slot(g_.before) * g_.chunk; }
  T query_scale(index_t /*head*/, index_t position) const { return norms_[queries_[position]]; }

  /// The whole window as one key range, split at panel boundaries, so its chunks share one
  /// score tile and one pass of the value accumulation (separate chunk tiles ran 10% slower).
  /// A piece needs the mask when one of its chunks may hold the query's own row (the query's
  /// chunk, or any chunk of another round: the self penalty) or padding, and always when
  /// causal (rows in sorted order are not in position order).
  template <class Visit>
  void for_each_key_tile(index_t /*head*/, index_t /*q_begin*/, index_t /*q_end*/, Visit&& visit) const {
    const index_t end = g_.window_slots();
    for (index_t begin = 0; begin < end;) {
      const index_t stop = std::min(end, (begin / key_rows_ + 1) * key_rows_);
      bool needs_mask = g_.causal;
      for (index_t slot = begin / g_.chunk; slot <= (stop - 1) / g_.chunk && !needs_mask; ++slot) {
        needs_mask = may_hold_row_or_padding(sequence_chunk(window_chunk(slot)));
      }
      visit(KeyTile{begin, stop, needs_mask});
      begin = stop;
    }
  }

  /// Excludes padding slots and (causal) rows after the query's row; selection only.
  template <class S>
  void exclude(index_t /*head*/, index_t position, const KeyTile& tile, S* scores) const {
    constexpr S kExcluded = -std::numeric_limits<S>::infinity();
    // Padding is kPaddingSlot, above every row: one comparison covers padding and causality.
    const std::int32_t last_attended = g_.causal ? queries_[position] : kPaddingSlot - 1;
    const std::int32_t* rows = window_slots_ + tile.begin;
    for (index_t c = 0; c < tile.end - tile.begin; ++c) scores[c] = rows[c] > last_attended ? kExcluded : scores[c];
  }

  /// The self penalty on keys at the query's own row.
  template <class S>
  void add_bias(index_t /*head*/, index_t position, const KeyTile& tile, S* scores, S unit) const {
    const S penalty = unit * static_cast<S>(kLshSelfPenalty);
    const std::int32_t self = queries_[position];
    const std::int32_t* rows = window_slots_ + tile.begin;
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
  /// The ring slot of window chunk w, and the window chunk at a ring slot.
  index_t ring_slot(index_t w) const { return (chunk_ + w) % g_.window(); }
  index_t window_chunk(index_t slot) const { return (slot - chunk_ % g_.window() + g_.window()) % g_.window(); }
  /// The sequence's chunk at window chunk w (circular over all rounds' chunks).
  index_t sequence_chunk(index_t w) const {
    const index_t all_chunks = g_.rounds * g_.chunks;
    return ((round_ * g_.chunks + chunk_ - g_.before + w) % all_chunks + all_chunks) % all_chunks;
  }
  /// Whether sequence chunk s may hold padding or the row of one of this chunk's queries.
  bool may_hold_row_or_padding(index_t s) const {
    const bool padding = s % g_.chunks == g_.chunks - 1 && g_.padded() != g_.n;
    const bool other_round = s / g_.chunks != round_;
    return padding || other_round || s == round_ * g_.chunks + chunk_;
  }

  LshGeometry g_;
  index_t round_ = 0;
  index_t chunk_ = 0;
  const std::int32_t* queries_ = nullptr;  // the chunk's slots
  const std::int32_t* order_ = nullptr;
  std::int32_t* window_slots_ = nullptr;
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
/// takes their norms (blocks of kHashRows), sorts each round (one round per item), then runs
/// the rounds one after the other. In a round every thread takes a contiguous run of query
/// chunks; for each it packs the chunk's window (its keys and values gathered from the sorted
/// order into panels of the thread's own, in L1/L2 while its query tiles read them) and runs
/// the chunk's query tiles (kernel::process_query_tile, the tiled driver's step), whose sink
/// folds each row's result into out. No panels of a whole round are built, so no barrier separates packing
/// from the query tiles, and no panel leaves the cache before it is read (a tiled pass per
/// round wrote and re-read 2 n (D + Dv) elements through L3). Every row's rounds are merged
/// in round order (one barrier per round), every output row is computed by one thread in a
/// fixed order: results do not depend on the thread count.
/// Extra memory (T = float, n = 65536, R = 8, D = Dv = 64): ids and sorted order R n int32
/// each (2 + 2 MiB), 2 n norms, the rotations, without a requested lse a running lse of n,
/// and per thread one window's panels, window() c (D + Dv) elements. Half q, k, v widen as
/// they are hashed and packed; a half out is merged in one head's n x Dv float rows (the
/// rounds fold into it) and narrowed once its last round is in.
template <class T>
class LshPlan {
 public:
  LshPlan(const LshGeometry& geometry, LshBucketLayout layout, const LshRotationSource& rotations,
          const TileShape& tiles)
      : g_(geometry), layout_(std::move(layout)), rotations_(rotations), tiles_(tiles) {}

  template <class Call>
  requires std::same_as<typename Call::value_type, T>
  void execute(const Call& call) const { execute(call, nullptr); }

  template <class Call>
  requires std::same_as<typename Call::value_type, T>
  void execute(const Call& call, LshPhaseTimes* times) const {
    constexpr bool kStagedOutput = !std::is_same_v<typename Call::output_type, T>;
    const AttentionShape& shape = call.shape;
    const index_t n = shape.q_len, heads = shape.q_heads;
    if (n == 0 || shape.batch == 0 || heads == 0) return;
    const index_t slots = g_.rounds * g_.padded();
    LshHasher<T> hasher(rotations_, layout_, g_.hashed ? heads : 0, shape.head_dim, g_.rounds);
    std::vector<index_t> counts(static_cast<std::size_t>(g_.hashed ? g_.rounds * (layout_.buckets + 1) : 0));
    std::int32_t* ids = attnkit::detail::thread_scratch<struct LshIdsTag, std::int32_t>(g_.rounds * n);
    std::int32_t* order = attnkit::detail::thread_scratch<struct LshOrderTag, std::int32_t>(slots);
    T* norms = attnkit::detail::thread_scratch<struct LshNormsTag, T>(n);
    T* norms_inverse = attnkit::detail::thread_scratch<struct LshInverseNormsTag, T>(n);
    T* running_lse = call.lse == nullptr ? attnkit::detail::thread_scratch<struct LshRunningLseTag, T>(n) : nullptr;
    T* staged_output =
        kStagedOutput ? attnkit::detail::thread_scratch<struct LshStagedOutputTag, T>(n * shape.value_dim) : nullptr;
    if (!g_.hashed) {
      for (index_t i = 0; i < n; ++i) order[i] = static_cast<std::int32_t>(i);
    }
    const index_t blocks = LshHasher<T>::blocks(n);
    // Panels no wider than the window, so packing never zeroes columns no score reads.
    const TileShape window_tiles{
        tiles_.query_rows,
        std::min(tiles_.key_rows, attnkit::detail::round_up(g_.window_slots(), static_cast<index_t>(simd::kWidth<T>)))};

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
      // This thread's window: its slots, its packed keys and values, its query-tile scratch.
      std::int32_t* window_slots =
          attnkit::detail::thread_scratch<struct LshWindowSlotsTag, std::int32_t>(g_.window_slots());
      CallPanels<Call> panels(shape, window_tiles, call.v, false, g_.window_slots());
      QueryTileWorkspace<T> work(shape, window_tiles, panels.value_stride());
      hasher.fill(team);
      for (index_t b = 0; b < shape.batch; ++b) {
        for (index_t h = 0; h < heads; ++h) {
          const auto* x = call.q.row(b, h, 0);
          const index_t x_stride = call.q.stride(kSeq);
          team.for_each_static(blocks, [&](index_t block) {
            if (g_.hashed) hasher.hash_block(x, x_stride, n, h, block, ids);
            const index_t first = block * kHashRows;
            row_norms<T>(x, x_stride, first, std::min(n, first + kHashRows), shape.head_dim,
                         static_cast<T>(static_cast<double>(shape.head_dim) * g_.key_epsilon), norms, norms_inverse);
          });
          mark(&LshPhaseTimes::hashing);
          if (g_.hashed) {
            team.for_each_static(g_.rounds, [&](index_t r) {
              sort_round(ids + r * n, n, g_.padded(), layout_.buckets, order + r * g_.padded(),
                         counts.data() + r * (layout_.buckets + 1));
            });
          }
          mark(&LshPhaseTimes::sorting);
          T* sink_rows = staged_output;
          index_t sink_stride = shape.value_dim;
          if constexpr (!kStagedOutput) {
            sink_rows = call.out.row(b, h, 0);
            sink_stride = call.out.stride(kSeq);
          }
          const typename LshWindowPlan<T>::Sink sink{sink_rows, sink_stride,
                                                     call.lse != nullptr ? call.lse->row(b, h, 0) : running_lse,
                                                     call.lse != nullptr ? call.lse->stride(kSeq) : 1, shape.value_dim};
          for (index_t r = 0; r < g_.rounds; ++r) {
            index_t packed_chunk = -2;  // the chunk whose window this thread's panels hold
            team.for_each_static(g_.chunks, [&](index_t chunk) {
              if (chunk + 1 < g_.chunks) {
                LshWindowPlan<T>(g_, r, chunk + 1, order, nullptr, norms, norms_inverse, window_tiles, sink)
                    .prefetch_rows(call.k.row(b, h, 0), call.k.stride(kSeq), shape.head_dim, call.v.row(b, h, 0),
                                   call.v.stride(kSeq));
              }
              const LshWindowPlan<T> window(g_, r, chunk, order, window_slots, norms, norms_inverse, window_tiles,
                                            sink);
              window.fill_window_slots();
              const auto key_row = [&](index_t p) { return window.key_row(h, p); };
              const auto key_scale = [&](index_t p) { return window.key_scale(h, p); };
              if (chunk == packed_chunk + 1) {
                const KeyRange entering = window.entering_positions();
                panels.repack_positions(call.k, b, h, entering.begin, entering.end - entering.begin, key_row,
                                        key_scale);
              } else {
                for (index_t tile = 0; tile < panels.tile_count(); ++tile) {
                  panels.pack_tile(call.k, b, h, tile, key_row, key_scale);
                }
              }
              packed_chunk = chunk;
              for (index_t q_begin = 0; q_begin < window.query_positions(); q_begin += window_tiles.query_rows) {
                process_query_tile(call, window, window_tiles, panels, work, b, h, q_begin,
                                   std::min(q_begin + window_tiles.query_rows, window.query_positions()));
              }
            });
          }
          if constexpr (kStagedOutput) {  // every round is in (the rounds' loops end with a barrier)
            team.for_each_static(n, [&](index_t i) {
              simd::narrow_row(staged_output + i * shape.value_dim, shape.value_dim, call.out.row(b, h, i));
            });
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
