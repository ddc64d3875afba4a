// The order in which a decode work item reads a stream of cache rows, and the rows it
// prefetches ahead of them (kernel/decode_chunk.hpp: read_stream, StreamCursor,
// leading_runs): every row of the stream read once, run by run and head by head, and before
// each row the one ahead_rows later in reading order prefetched, across heads, runs, pages
// shorter than the distance, and into the stream read next.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "attnkit/kernel/decode_chunk.hpp"

namespace attnkit::testing {
namespace {

// A paged float cache of one sequence: 6 pages [6, Hk = 2, page 4, D = 8] for K and V, its 14
// tokens on pages 3, 0, 5, 1 (the table's order shuffled, so consecutive pages do not lie
// together).
struct SmallPagedCache {
  static constexpr index_t kPages = 6, kHeads = 2, kPage = 4, kDim = 8, kLength = 14;
  std::vector<float> k = std::vector<float>(kPages * kHeads * kPage * kDim);
  std::vector<float> v = std::vector<float>(k.size());
  std::vector<std::int32_t> table{3, 0, 5, 1};
  std::vector<index_t> lengths{kLength};
  std::vector<index_t> query_offsets{0, 1};

  kernel::DecodeCall<float> call() const {
    const kernel::DecodeGeometry geometry{lengths, query_offsets, false, 1, kHeads, kHeads, kDim, kDim};
    const attnkit::detail::CacheRows<const float> rows(bhld(k.data(), kPages, kHeads, kPage, kDim),
                                                       bhld(v.data(), kPages, kHeads, kPage, kDim), table.data(),
                                                       static_cast<index_t>(table.size()), kPage);
    return {geometry, rows, nullptr, kDim};
  }
};

// The rows of `stream` in reading order (the definition: runs in order, each run head by head).
std::vector<const float*> reading_order(const kernel::DecodeCall<float>& call, const kernel::DecodeStream& stream) {
  std::vector<const float*> rows;
  for (const KeyRange& run : stream.runs)
    for (index_t h = 0; h < stream.heads.count; ++h)
      for (index_t c = run.begin; c < run.end; ++c)
        rows.push_back(stream.keys ? call.cache.key(stream.b, stream.heads.first + h, c)
                                   : call.cache.value(stream.b, stream.heads.first + h, c));
  return rows;
}

// read_stream over `stream` followed by `next`: the calls read every row of `stream` once, in
// reading order, and before the row at position p the row at p + ahead_rows of the
// concatenated order is prefetched (none past its end).
void expect_reads_and_prefetches(const kernel::DecodeCall<float>& call, const kernel::DecodeStream& stream,
                                 const kernel::DecodeStream& next, index_t ahead_rows) {
  SCOPED_TRACE("ahead_rows " + std::to_string(ahead_rows));
  const std::vector<const float*> own = reading_order(call, stream);
  std::vector<const float*> all = own;
  for (const float* row : reading_order(call, next)) all.push_back(row);

  std::size_t position = 0;
  kernel::read_stream(
      call, stream, next, ahead_rows, [&](index_t h, index_t c0, index_t c1, const simd::RowPrefetch<float>& ahead) {
        ASSERT_LT(c0, c1);
        for (index_t c = c0; c < c1; ++c, ++position) {
          ASSERT_LT(position, own.size());
          const index_t g = stream.heads.first + h;
          EXPECT_EQ(stream.keys ? call.cache.key(stream.b, g, c) : call.cache.value(stream.b, g, c), own[position])
              << "row " << position << " read out of order";
          const index_t j = c - c0;
          const std::size_t target = position + static_cast<std::size_t>(ahead_rows);
          if (target < all.size()) {
            ASSERT_NE(ahead.address(j), nullptr) << "row " << position << " prefetches nothing";
            EXPECT_EQ(ahead.address(j), all[target]) << "row " << position;
            EXPECT_EQ(ahead.elements, SmallPagedCache::kDim);
          } else {
            EXPECT_EQ(ahead.address(j), nullptr) << "row " << position << " prefetches past both streams";
          }
        }
      });
  EXPECT_EQ(position, own.size()) << "rows left unread";
}

TEST(DecodeStream, ReadsInOrderAndPrefetchesAheadAcrossHeadsPagesAndStreams) {
  const SmallPagedCache cache;
  const kernel::DecodeCall<float> call = cache.call();
  // The attended keys of a block: whole page 0, half of page 1 (keys 6 and 7 not attended),
  // whole page 2; the K stream is followed by the same runs' V rows.
  const std::vector<KeyRange> runs{{0, 4}, {4, 6}, {8, 12}};
  const kernel::DecodeStream keys{true, 0, {0, 2}, runs}, values{false, 0, {0, 2}, runs};
  // Shorter than a run, as long as one, across several runs and heads, past the end of both.
  for (index_t ahead_rows : {1, 2, 4, 5, 9, 20, 40, 41}) expect_reads_and_prefetches(call, keys, values, ahead_rows);
  // One kv head of two; an empty stream next.
  const kernel::DecodeStream second_head{true, 0, {1, 1}, runs};
  for (index_t ahead_rows : {3, 10}) expect_reads_and_prefetches(call, second_head, {false, 0, {1, 1}, {}}, ahead_rows);
}

// How many read calls read_stream makes over `stream` followed by `next`.
std::size_t read_calls(const kernel::DecodeCall<float>& call, const kernel::DecodeStream& stream,
                       const kernel::DecodeStream& next, index_t ahead_rows) {
  std::size_t calls = 0;
  kernel::read_stream(call, stream, next, ahead_rows,
                      [&](index_t, index_t, index_t, const simd::RowPrefetch<float>&) { ++calls; });
  return calls;
}

TEST(DecodeStream, OneCallPerRunAndHeadWhenTheRowsAheadCrossAHead) {
  const SmallPagedCache cache;
  const kernel::DecodeCall<float> call = cache.call();
  // Two whole pages, two heads: 4 (run, head) pieces of 4 rows. Rows ahead 1 ... 4 start inside
  // one piece and end in the next, so every piece is one call; only the last piece, whose rows
  // ahead go on into the V stream (another piece of another stream), may be cut once.
  const std::vector<KeyRange> runs{{0, 4}, {4, 8}};
  const kernel::DecodeStream keys{true, 0, {0, 2}, runs}, values{false, 0, {0, 2}, runs};
  for (index_t ahead_rows : {1, 3, 4}) {
    SCOPED_TRACE("ahead_rows " + std::to_string(ahead_rows));
    EXPECT_LE(read_calls(call, keys, values, ahead_rows), 5u);
    expect_reads_and_prefetches(call, keys, values, ahead_rows);
  }
}

TEST(DecodeStream, LeadingRunsArePagesCoveringTheDistance) {
  const SmallPagedCache cache;
  const kernel::DecodeCall<float> call = cache.call();
  std::vector<KeyRange> runs;
  // From key 5: the rest of page 1 (3 keys x 2 heads = 6 rows) covers 5 rows, not 7.
  kernel::leading_runs(call, 5, SmallPagedCache::kLength, 2, 5, runs);
  EXPECT_EQ(runs, (std::vector<KeyRange>{{5, 8}}));
  kernel::leading_runs(call, 5, SmallPagedCache::kLength, 2, 7, runs);
  EXPECT_EQ(runs, (std::vector<KeyRange>{{5, 8}, {8, 12}}));
  // Never past the limit (the sequence's length, or the chunk's end), and none from it.
  kernel::leading_runs(call, 9, SmallPagedCache::kLength, 1, 100, runs);
  EXPECT_EQ(runs, (std::vector<KeyRange>{{9, 12}, {12, 14}}));
  kernel::leading_runs(call, 14, SmallPagedCache::kLength, 2, 4, runs);
  EXPECT_TRUE(runs.empty());
}

}  // namespace
}  // namespace attnkit::testing
