#pragma once
// Decode over KV caches, against the machine's read bandwidth, paired: attention of
// one new query row per sequence over a cache (Llama-3-8B layer: Hq = 32, Hk = 8, D = Dv = 128,
// causal), alternating with a read-bandwidth probe over the same cache bytes on the same
// threads. The caches of enough layers to fill twice the L3 are cycled, so both sides read
// memory, not the cache hierarchy (INFERENCE.md section 5).
//   paired/decode/<type>/<layout>/B:<b>/threads:<t>  context n = 4096, 32768, 131072 (B = 8:
//       32768, ragged lengths n/2 ... n, paged); layout contiguous, paged (64-token pages) or
//       paged:16 (vLLM's default page of 16 tokens; float16 and 8-bit blocks); counters gbps
//       (cache bytes the call reads per second), probe_gbps, of_probe (per pair: probe time over
//       call time, median, _min, _max), tokens_per_s (sequences decoded per second, one layer)
//   paired/decode_threads/<type>/<layout>/threads:<t>  n = 32768, 131072, B = 1, t > 1: calls on
//       t threads alternating with calls on one over the same layers; threads_speedup = one
//       thread's time over t threads' per pair
//   paired/decode_q8_over_fp16/threads:<t>  n = 131072: 8-bit blocks (exact scores, and the
//       8-bit query mode) against float16, the three calls alternating; q8_speedup = fp16 time
//       over exact q8 time per round, q8_query_speedup = fp16 time over quantized-query time
//   paired/decode_window/threads:<t>  n = 131072, float16: a causal window of 4096 against full
//       causal attention over the cache; window_share = window time over full time per pair

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <unistd.h>

#include "attnkit/attnkit.hpp"
#include "attnkit/simd/batch.hpp"
#include "bench_support.hpp"
#include "dense_paired_bench.hpp"
#include "report.hpp"

namespace attnkit::bench {

/// The decode targets (PERF.md, INFERENCE.md).
inline constexpr double kDecodeProbeTarget = 0.80;       // float, bf16, fp16 caches: of the probe
inline constexpr double kDecodeBatchProbeTarget = 0.75;  // B = 8 ragged paged
inline constexpr double kDecodeQ8QueryTarget = 1.6;      // q8, 8-bit query mode, over fp16 tokens/s at 131072
inline constexpr double kDecodeQ8Target = 1.0;           // q8, exact scores, over fp16: not slower
inline constexpr double kDecodeWindowTarget = 0.05;      // window 4096 over full at 131072
inline constexpr double kDecodeThreadsTarget = 1.0;      // all threads over one: faster

namespace detail {

inline constexpr index_t kDecodeQueryHeads = 32, kDecodeKvHeads = 8, kDecodeDim = 128;

/// How a layer's cache is laid out: contiguous (page_size 0) or in pages of page_size tokens.
struct DecodeLayout {
  index_t page_size = 0;
  bool paged() const { return page_size > 0; }
  /// "contiguous", "paged" (the default 64-token pages) or "paged:<tokens>".
  std::string name() const {
    if (!paged()) return "contiguous";
    return page_size == 64 ? std::string("paged") : "paged:" + std::to_string(page_size);
  }
};
inline constexpr DecodeLayout kContiguous{0}, kPaged{64}, kShortPages{16};

/// Bytes of L3 (sysconf), or 256 MiB (the Intel machines here) when unknown.
inline std::size_t l3_bytes() {
  const long size = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return size > 0 ? static_cast<std::size_t>(size) : std::size_t{256} << 20;
}

/// One layer's cache: storage, lengths, block table, and its views.
template <CacheElement E>
struct DecodeLayer {
  DecodeLayer(const std::vector<index_t>& sequence_lengths, DecodeLayout cache_layout)
      : lengths(sequence_lengths), layout(cache_layout) {
    const index_t batch = static_cast<index_t>(lengths.size());
    const index_t longest = *std::max_element(lengths.begin(), lengths.end());
    const index_t row = kDecodeDim / kValuesPerElement<E>;
    if (layout.paged()) {
      pages_per_sequence = ceil_div_pages(longest);
      index_t pages = 0;
      for (index_t length : lengths) pages += ceil_div_pages(length);
      table.assign(static_cast<std::size_t>(batch * pages_per_sequence), -1);
      // Pages handed out round-robin across sequences, as an allocator serving a batch would.
      index_t next = 0;
      for (index_t p = 0; p < pages_per_sequence; ++p)
        for (index_t b = 0; b < batch; ++b)
          if (p < ceil_div_pages(lengths[static_cast<std::size_t>(b)]))
            table[static_cast<std::size_t>(b * pages_per_sequence + p)] = static_cast<std::int32_t>(next++);
      slots = pages * layout.page_size;
    } else {
      capacity = longest;
      slots = batch * capacity;
    }
    k.resize(static_cast<std::size_t>(slots * kDecodeKvHeads * row));
    v.resize(k.size());
    fill(k, 1);
    fill(v, 2);
  }
  index_t ceil_div_pages(index_t n) const { return (n + layout.page_size - 1) / layout.page_size; }
  static void fill(std::vector<E>& x, unsigned seed) {
    const std::vector<float>& values = normal_values(4096, seed);
    for (std::size_t i = 0; i < x.size(); ++i) {
      if constexpr (std::is_same_v<E, q8_0_block>) {
        x[i] = quantize_q8_0(values.data() + (i * 32) % 4064);
      } else {
        x[i] = store_as<E>(values[i % values.size()]);
      }
    }
  }
  KvCache<E> contiguous() {
    const index_t row = kDecodeDim / kValuesPerElement<E>;
    const index_t batch = static_cast<index_t>(lengths.size());
    return KvCache<E>{bhld(k.data(), batch, kDecodeKvHeads, capacity, row),
                      bhld(v.data(), batch, kDecodeKvHeads, capacity, row), lengths};
  }
  PagedKvCache<E> paged_view() {
    const index_t row = kDecodeDim / kValuesPerElement<E>;
    const index_t pages = slots / layout.page_size;
    return PagedKvCache<E>{
        bhld(k.data(), pages, kDecodeKvHeads, layout.page_size, row),
        bhld(v.data(), pages, kDecodeKvHeads, layout.page_size, row),
        PageTable{table.data(), static_cast<index_t>(lengths.size()), pages_per_sequence, pages_per_sequence}, lengths};
  }
  /// Bytes of K and V a full-cache call reads.
  double bytes() const { return 2.0 * static_cast<double>(k.size() * sizeof(E)); }

  std::vector<index_t> lengths;
  DecodeLayout layout;
  index_t capacity = 0, pages_per_sequence = 0, slots = 0;
  std::vector<E> k, v;
  std::vector<std::int32_t> table;
};

/// Layers to cycle: their caches fill at least twice the L3 (at least 2 layers).
inline index_t decode_layer_count(double layer_bytes) {
  return std::max<index_t>(2, static_cast<index_t>(2.0 * static_cast<double>(l3_bytes()) / layer_bytes) + 1);
}

/// Seconds of the read probe: a vectorised integer sum over every byte of the layer's K and V
/// on `threads` threads (static split, as the decode call's memory is).
template <CacheElement E>
double read_probe_seconds(const DecodeLayer<E>& layer, int threads) {
  using Lane = simd::Batch<std::int32_t>;
  constexpr std::size_t kLanes = simd::kWidth<std::int32_t>;
  const auto start = std::chrono::steady_clock::now();
  std::int64_t total = 0;
  for (const std::vector<E>* buffer : {&layer.k, &layer.v}) {
    const auto* words = reinterpret_cast<const std::int32_t*>(buffer->data());
    const std::int64_t count = static_cast<std::int64_t>(buffer->size() * sizeof(E) / sizeof(std::int32_t));
    const std::int64_t vectors = count / static_cast<std::int64_t>(4 * kLanes);
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : total)
    for (std::int64_t i = 0; i < vectors; ++i) {
      const std::int32_t* at = words + i * static_cast<std::int64_t>(4 * kLanes);
      const Lane sum = (Lane::load_unaligned(at) + Lane::load_unaligned(at + kLanes)) +
                       (Lane::load_unaligned(at + 2 * kLanes) + Lane::load_unaligned(at + 3 * kLanes));
      total += xsimd::hadd(sum);
    }
  }
  benchmark::DoNotOptimize(total);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Seconds of one decode call (one query row per sequence) of `pattern` over the layer's cache
/// (with the 8-bit query mode when asked: 8-bit caches only).
template <CacheElement E, class Pattern>
double decode_seconds(const Pattern& pattern, DecodeLayer<E>& layer, const std::vector<float>& q,
                      std::vector<float>& out, int threads, bool quantized_query = false) {
  const index_t batch = static_cast<index_t>(layer.lengths.size());
  const auto qv = bhld(q.data(), batch, kDecodeQueryHeads, 1, kDecodeDim);
  const auto ov = bhld(out.data(), batch, kDecodeQueryHeads, 1, kDecodeDim);
  const Options options{.threads = threads, .quantized_query = quantized_query};
  const auto start = std::chrono::steady_clock::now();
  if (layer.layout.paged()) {
    attention(pattern, qv, layer.paged_view(), ov, options);
  } else {
    attention(pattern, qv, layer.contiguous(), ov, options);
  }
  benchmark::DoNotOptimize(out.data());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Lengths of the batch: B = 1 at n; B = 8 ragged from n / 2 to n.
inline std::vector<index_t> decode_lengths(index_t batch, index_t n) {
  std::vector<index_t> lengths;
  for (index_t b = 0; b < batch; ++b) lengths.push_back(batch == 1 ? n : n / 2 + (n / 2) * b / (batch - 1));
  return lengths;
}

/// The caches of `count` layers of the batch (0: enough to fill twice the L3).
template <CacheElement E>
std::vector<DecodeLayer<E>> decode_layers(index_t batch, index_t n, DecodeLayout layout, index_t count = 0) {
  std::vector<DecodeLayer<E>> layers;
  layers.emplace_back(decode_lengths(batch, n), layout);
  if (count == 0) count = decode_layer_count(layers.front().bytes());
  while (static_cast<index_t>(layers.size()) < count) layers.emplace_back(decode_lengths(batch, n), layout);
  return layers;
}

/// N(0, 1) queries [B, Hq, 1, D].
inline std::vector<float> decode_queries(index_t batch) {
  const std::vector<float>& values = normal_values(static_cast<std::size_t>(batch * kDecodeQueryHeads * kDecodeDim), 3);
  return std::vector<float>(values.begin(), values.end());
}

inline int decode_rounds(index_t n) { return n <= 4096 ? 15 : 9; }

template <CacheElement E>
std::string decode_type_name() {
  if constexpr (std::is_same_v<E, float>) return "float";
  if constexpr (std::is_same_v<E, bfloat16>) return "bf16";
  if constexpr (std::is_same_v<E, float16>) return "fp16";
  if constexpr (std::is_same_v<E, q8_0_block>) return "q8_0";
}

inline std::string decode_family(const std::string& type, DecodeLayout layout, index_t batch, int threads) {
  return "paired/decode/" + type + "/" + layout.name() + "/B:" + std::to_string(batch) +
         "/threads:" + std::to_string(threads);
}

inline std::string decode_threads_family(const std::string& type, DecodeLayout layout, int threads) {
  return "paired/decode_threads/" + type + "/" + layout.name() + "/threads:" + std::to_string(threads);
}

/// The contexts of `wanted` inside the run's n range.
inline std::vector<index_t> contexts_in_range(const std::vector<index_t>& wanted) {
  std::vector<index_t> ns;
  for (index_t n : wanted)
    if (n >= g_size_range.min_n && n <= g_size_range.max_n) ns.push_back(n);
  return ns;
}

/// Registers one paired/decode family.
template <CacheElement E>
void register_decode_family(Registry& registry, DecodeLayout layout, index_t batch, int team,
                            const std::vector<index_t>& contexts) {
  const std::string name = decode_family(decode_type_name<E>(), layout, batch, team);
  auto* family = register_at(name, contexts_in_range(contexts), [=](benchmark::State& state) {
    const index_t n = state.range(0);
    std::vector<DecodeLayer<E>> layers = decode_layers<E>(batch, n, layout);
    const std::vector<float> q = decode_queries(batch);
    std::vector<float> out(q.size());
    const Full causal{.causal = true};
    decode_seconds(causal, layers.front(), q, out, team);  // warm: scratch
    std::vector<double> call_times, probe_times, of_probe;
    std::size_t next = 0;
    for (auto _ : state) {
      for (int round = 0; round < decode_rounds(n); ++round) {
        DecodeLayer<E>& layer = layers[next++ % layers.size()];
        double call = 0, probe = 0;
        if (round % 2 == 0) {
          call = decode_seconds(causal, layer, q, out, team), probe = read_probe_seconds(layer, team);
        } else {
          probe = read_probe_seconds(layer, team), call = decode_seconds(causal, layer, q, out, team);
        }
        call_times.push_back(call);
        probe_times.push_back(probe);
        of_probe.push_back(probe / call);
      }
      state.SetIterationTime(median(call_times));
    }
    const double bytes = layers.front().bytes();
    state.counters["gbps"] = bytes / median(call_times) * 1e-9;
    state.counters["probe_gbps"] = bytes / median(probe_times) * 1e-9;
    set_ratio_counters(state, "of_probe", of_probe);
    state.counters["tokens_per_s"] = static_cast<double>(batch) / median(call_times);
    state.counters["layers"] = static_cast<double>(layers.size());
  });
  if (family == nullptr) return;
  family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  registry.add(name, BenchmarkInfo{"paired", "decode/" + decode_type_name<E>(), kDecodeDim, team});
}

/// Registers one paired/decode_threads family: B = 1, calls on `team` threads alternating
/// with calls on one thread over the same layer (which side goes first alternates too).
template <CacheElement E>
void register_decode_threads_family(Registry& registry, DecodeLayout layout, int team,
                                    const std::vector<index_t>& contexts) {
  const std::string name = decode_threads_family(decode_type_name<E>(), layout, team);
  auto* family = register_at(name, contexts_in_range(contexts), [=](benchmark::State& state) {
    const index_t n = state.range(0);
    std::vector<DecodeLayer<E>> layers = decode_layers<E>(1, n, layout);
    const std::vector<float> q = decode_queries(1);
    std::vector<float> out(q.size());
    const Full causal{.causal = true};
    decode_seconds(causal, layers.front(), q, out, team);  // warm: scratch and the thread team
    std::vector<double> team_times, speedups;
    std::size_t next = 0;
    for (auto _ : state) {
      for (int round = 0; round < decode_rounds(n); ++round) {
        DecodeLayer<E>& layer = layers[next++ % layers.size()];
        double one = 0, all = 0;
        if (round % 2 == 0) {
          one = decode_seconds(causal, layer, q, out, 1), all = decode_seconds(causal, layer, q, out, team);
        } else {
          all = decode_seconds(causal, layer, q, out, team), one = decode_seconds(causal, layer, q, out, 1);
        }
        team_times.push_back(all);
        speedups.push_back(one / all);
      }
      state.SetIterationTime(median(team_times));
    }
    set_ratio_counters(state, "threads_speedup", speedups);
  });
  if (family == nullptr) return;
  family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  registry.add(name, BenchmarkInfo{"paired", "decode_threads/" + decode_type_name<E>(), kDecodeDim, team});
}

}  // namespace detail

/// Registers the Decode section's families on 1 and `threads` threads.
inline void register_decode_paired(Registry& registry, int threads) {
  const std::vector<index_t> contexts{4096, 32768, 131072};
  for (const int team : detail::peak_teams(threads)) {
    for (const detail::DecodeLayout layout : {detail::kContiguous, detail::kPaged}) {
      detail::register_decode_family<float>(registry, layout, 1, team, contexts);
      detail::register_decode_family<bfloat16>(registry, layout, 1, team, contexts);
      detail::register_decode_family<float16>(registry, layout, 1, team, contexts);
      detail::register_decode_family<q8_0_block>(registry, layout, 1, team, contexts);
    }
    detail::register_decode_family<float16>(registry, detail::kPaged, 8, team, {32768});
    // Short pages: a run of 16 rows is shorter than the prefetch distance.
    detail::register_decode_family<float16>(registry, detail::kShortPages, 1, team, {32768, 131072});
    detail::register_decode_family<q8_0_block>(registry, detail::kShortPages, 1, team, {32768, 131072});
    detail::register_decode_family<float16>(registry, detail::kShortPages, 8, team, {32768});

    // 8-bit blocks against float16, and a causal window against the full cache, at 131072.
    const std::vector<index_t> longest = sizes(131072, 131072);
    const std::string q8_name = "paired/decode_q8_over_fp16/threads:" + std::to_string(team);
    if (auto* family = register_at(q8_name, longest, [=](benchmark::State& state) {
          const index_t n = state.range(0);
          std::vector<detail::DecodeLayer<float16>> fp16 = detail::decode_layers<float16>(1, n, detail::kContiguous);
          std::vector<detail::DecodeLayer<q8_0_block>> q8 =
              detail::decode_layers<q8_0_block>(1, n, detail::kContiguous, static_cast<index_t>(fp16.size()));
          const std::vector<float> q = detail::decode_queries(1);
          std::vector<float> out(q.size());
          const Full causal{.causal = true};
          std::vector<double> query_times, speedups, query_speedups;
          for (auto _ : state) {
            for (int round = 0; round < detail::decode_rounds(n); ++round) {
              const std::size_t layer = static_cast<std::size_t>(round) % q8.size();
              // The three calls in a rotating order, so that none always follows the same one.
              double seconds[3] = {};  // float16, q8 exact, q8 with the 8-bit query mode
              for (int turn = 0; turn < 3; ++turn) {
                const int call = (round + turn) % 3;
                seconds[call] = call == 0 ? detail::decode_seconds(causal, fp16[layer], q, out, team)
                                          : detail::decode_seconds(causal, q8[layer], q, out, team, call == 2);
              }
              query_times.push_back(seconds[2]);
              speedups.push_back(seconds[0] / seconds[1]);
              query_speedups.push_back(seconds[0] / seconds[2]);
            }
            state.SetIterationTime(median(query_times));
          }
          set_ratio_counters(state, "q8_speedup", speedups);
          set_ratio_counters(state, "q8_query_speedup", query_speedups);
        })) {
      family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
      registry.add(q8_name, BenchmarkInfo{"paired", "decode_q8_over_fp16", detail::kDecodeDim, team});
    }
    const std::string window_name = "paired/decode_window/threads:" + std::to_string(team);
    if (auto* family = register_at(window_name, longest, [=](benchmark::State& state) {
          const index_t n = state.range(0);
          std::vector<detail::DecodeLayer<float16>> layers = detail::decode_layers<float16>(1, n, detail::kContiguous);
          const std::vector<float> q = detail::decode_queries(1);
          std::vector<float> out(q.size());
          const Full causal{.causal = true};
          const SlidingWindow window = SlidingWindow::causal(4096);
          std::vector<double> window_times, shares;
          for (auto _ : state) {
            for (int round = 0; round < detail::decode_rounds(n); ++round) {
              auto& layer = layers[static_cast<std::size_t>(round) % layers.size()];
              const double t_window = detail::decode_seconds(window, layer, q, out, team);
              const double t_full = detail::decode_seconds(causal, layer, q, out, team);
              window_times.push_back(t_window);
              shares.push_back(t_window / t_full);
            }
            state.SetIterationTime(median(window_times));
          }
          set_ratio_counters(state, "window_share", shares);
        })) {
      family->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
      registry.add(window_name, BenchmarkInfo{"paired", "decode_window", detail::kDecodeDim, team});
    }
  }
  // All threads against one, paired (the of_probe families of the two teams run minutes apart).
  if (threads == 1) return;
  for (const detail::DecodeLayout layout : {detail::kContiguous, detail::kPaged}) {
    detail::register_decode_threads_family<float>(registry, layout, threads, {32768, 131072});
    detail::register_decode_threads_family<bfloat16>(registry, layout, threads, {32768, 131072});
    detail::register_decode_threads_family<float16>(registry, layout, threads, {32768, 131072});
    detail::register_decode_threads_family<q8_0_block>(registry, layout, threads, {32768, 131072});
  }
}

/// The decode target rows.
inline void write_decode_targets(std::ostream& out, const ReportData& data, int threads) {
  const auto row = [&](const std::string& label, const std::string& name, index_t n, const std::string& tag,
                       double target, bool at_most, double scale, const std::string& unit) {
    const auto value = detail::find_counter(data.runs, name, n, tag);
    out << "| " << label << " | "
        << (value ? detail::ratio_text(*value, *detail::find_counter(data.runs, name, n, tag + "_min"),
                                       *detail::find_counter(data.runs, name, n, tag + "_max"), scale, 1, unit)
                  : std::string("not measured"))
        << " | " << (at_most ? "<= " : ">= ") << detail::fixed(scale * target, scale == 1 ? 1 : 0) << unit << " | "
        << (value ? ((at_most ? *value <= target : *value >= target) ? "yes" : "NO") : "-") << " |\n";
  };
  for (const int team : detail::peak_teams(threads)) {
    const std::string t = std::to_string(team) + (team == 1 ? " thread" : " threads");
    for (const char* type : {"float", "bf16", "fp16"})
      for (const detail::DecodeLayout layout : {detail::kContiguous, detail::kPaged})
        for (const index_t n : {index_t{32768}, index_t{131072}})
          row(std::string("decode ") + type + " " + layout.name() + ", n = " + std::to_string(n) + ", " + t +
                  ": of the read probe, paired",
              detail::decode_family(type, layout, 1, team), n, "of_probe", kDecodeProbeTarget, false, 100, "%");
    row("decode fp16 paged, B = 8 ragged, n = 32768, " + t + ": of the read probe, paired",
        detail::decode_family("fp16", detail::kPaged, 8, team), 32768, "of_probe", kDecodeBatchProbeTarget, false, 100,
        "%");
    row("decode q8_0, 8-bit query mode, over fp16 tokens/s, n = 131072, " + t + ", paired",
        "paired/decode_q8_over_fp16/threads:" + std::to_string(team), 131072, "q8_query_speedup", kDecodeQ8QueryTarget,
        false, 1, " x");
    row("decode q8_0, exact scores, over fp16 tokens/s, n = 131072, " + t + ", paired",
        "paired/decode_q8_over_fp16/threads:" + std::to_string(team), 131072, "q8_speedup", kDecodeQ8Target, false, 1,
        " x");
    row("decode causal window 4096 over full, n = 131072, fp16, " + t + ", paired",
        "paired/decode_window/threads:" + std::to_string(team), 131072, "window_share", kDecodeWindowTarget, true, 100,
        "%");
  }
  if (threads == 1) return;
  for (const char* type : {"float", "bf16", "fp16"})
    for (const detail::DecodeLayout layout : {detail::kContiguous, detail::kPaged})
      for (const index_t n : {index_t{32768}, index_t{131072}})
        row(std::string("decode ") + type + " " + layout.name() + ", n = " + std::to_string(n) + ": " +
                std::to_string(threads) + " threads over 1 thread, paired",
            detail::decode_threads_family(type, layout, threads), n, "threads_speedup", kDecodeThreadsTarget, false, 1,
            " x");
}

/// Report section: every decode family's GB/s against its probe and tokens/s.
inline void write_decode_section(std::ostream& out, const ReportData& data, int threads) {
  out << "## Decode\n\n"
      << "One query row per sequence against a KV cache (Hq = 32, Hk = 8, D = Dv = 128, causal), alternating "
         "with a read probe over the same cache bytes on the same threads; the caches of enough layers to fill "
         "twice the L3 are cycled (bench/decode_bench.hpp). GB/s counts the K and V bytes a call reads.\n\n"
      << "| cache | layout | B | threads | n | GB/s | probe GB/s | of the probe | tokens/s (one layer) |\n"
      << "|---|---|---|---|---|---|---|---|---|\n";
  for (const int team : detail::peak_teams(threads))
    for (const char* type : {"float", "bf16", "fp16", "q8_0"})
      for (const detail::DecodeLayout layout : {detail::kContiguous, detail::kPaged, detail::kShortPages})
        for (const index_t batch : {index_t{1}, index_t{8}}) {
          const std::string name = detail::decode_family(type, layout, batch, team);
          for (const index_t n : {index_t{4096}, index_t{32768}, index_t{131072}}) {
            const auto gbps = detail::find_counter(data.runs, name, n, "gbps");
            if (!gbps) continue;
            out << "| " << type << " | " << layout.name() << " | " << batch << " | " << team << " | " << n << " | "
                << detail::fixed(*gbps, 1) << " | "
                << detail::fixed(*detail::find_counter(data.runs, name, n, "probe_gbps"), 1) << " | "
                << detail::ratio_text(*detail::find_counter(data.runs, name, n, "of_probe"),
                                      *detail::find_counter(data.runs, name, n, "of_probe_min"),
                                      *detail::find_counter(data.runs, name, n, "of_probe_max"), 100, 1, "%")
                << " | " << detail::fixed(*detail::find_counter(data.runs, name, n, "tokens_per_s"), 1) << " |\n";
          }
        }
  out << "\n";
  if (threads == 1) return;
  out << "All " << threads << " threads against one, calls alternating over the same layers (B = 1): one "
      << "thread's time over the team's, median of the pairs [min, max].\n\n"
      << "| cache | layout | n | speedup |\n|---|---|---|---|\n";
  for (const char* type : {"float", "bf16", "fp16", "q8_0"})
    for (const detail::DecodeLayout layout : {detail::kContiguous, detail::kPaged})
      for (const index_t n : {index_t{32768}, index_t{131072}}) {
        const std::string name = detail::decode_threads_family(type, layout, threads);
        const auto speedup = detail::find_counter(data.runs, name, n, "threads_speedup");
        if (!speedup) continue;
        out << "| " << type << " | " << layout.name() << " | " << n << " | "
            << detail::ratio_text(*speedup, *detail::find_counter(data.runs, name, n, "threads_speedup_min"),
                                  *detail::find_counter(data.runs, name, n, "threads_speedup_max"), 1, 2, " x")
            << " |\n";
      }
  out << "\n";
}

}  // namespace attnkit::bench
