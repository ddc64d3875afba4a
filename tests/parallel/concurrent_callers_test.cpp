// Concurrent callers: 8 std::threads call attnkit::attention at once with every kind, several
// shapes, element types (float; bfloat16 in and out; float16 in, float out) and thread counts, from outside and from
// inside OpenMP regions of their own; every result must equal, bit for bit, the same call made alone on one thread
// (Options::threads promises identical results for every thread count). Built as its own binary so that the tsan preset
// can build and run it alone under ThreadSanitizer (README "Concurrency").

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include <omp.h>

#include "attnkit/attention.hpp"
#include "attnkit/core/options.hpp"
#include "attnkit/core/shape.hpp"
#include "attnkit/pattern/kernelized_rpe.hpp"
#include "attnkit/pattern/kinds.hpp"
#include "attnkit/pattern/lsh.hpp"
#include "dispatch/dispatch_kinds.hpp"
#include "support/test_data.hpp"

namespace attnkit::testing {
namespace {

inline constexpr int kCallers = 8;
inline constexpr int kRounds = 2;
/// OpenMP threads of the region a caller opens around its calls when a job says so.
inline constexpr int kRegionThreads = 2;

/// The element types of a job's call: q, k, v and out.
enum class Elements { kFloat, kBfloat16, kFloat16ToFloat };

/// One call: a pattern on its inputs (float, rounded to the job's element type), with a
/// thread count, made either from the caller's own thread or from each member of an OpenMP
/// region the caller opens.
struct Job {
  AnyKind pattern;
  Problem<float> problem;
  Elements elements;
  int threads;
  bool inside_region;
  bool with_lse;
  std::string name;
};

/// Output (widened to float) and log-sum-exp of one call.
struct Result {
  Tensor<float> out, lse;
};

/// The job's call with q, k, v of type E and out of type Out.
template <class E, class Out>
Result run_as(const Job& job, int threads) {
  const AttentionShape& s = job.problem.shape;
  const Tensor<E> q = converted<E>(job.problem.q, Layout::kBHLD), v = converted<E>(job.problem.v, Layout::kBHLD);
  Tensor<Out> out(s.batch, s.q_heads, s.q_len, s.value_dim, Layout::kBHLD);
  Tensor<float> lse(s.batch, s.q_heads, s.q_len, 1, Layout::kBHLD);
  const Options options{.threads = threads};
  // Lsh shares its keys with the queries (the dispatch kinds' calls pass q as k throughout).
  if (job.with_lse) {
    attention(job.pattern, q.cview(), q.cview(), v.cview(), out.view, lse.view, options);
  } else {
    attention(job.pattern, q.cview(), q.cview(), v.cview(), out.view, options);
  }
  return Result{converted<float>(out, Layout::kBHLD), lse};
}

Result run(const Job& job, int threads) {
  switch (job.elements) {
    case Elements::kBfloat16:
      return run_as<bfloat16, bfloat16>(job, threads);
    case Elements::kFloat16ToFloat:
      return run_as<float16, float>(job, threads);
    case Elements::kFloat:
      break;
  }
  return run_as<float, float>(job, threads);
}

bool same_bits(const Result& a, const Result& b) {
  return std::memcmp(a.out.data.data(), b.out.data.data(), a.out.data.size() * sizeof(float)) == 0 &&
         std::memcmp(a.lse.data.data(), b.lse.data.data(), a.lse.data.size() * sizeof(float)) == 0;
}

/// Every registered kind (dispatch_kinds, plus KernelizedRpe on its FFT path) on
/// three shapes (batch, head and value widths; dispatch_kinds' patterns fix n and Hq), each in
/// one of the element types in turn; thread counts 1, 2, 3 and the default; every fourth job
/// inside a region.
std::vector<Job> make_jobs() {
  std::vector<AnyKind> kinds = dispatch_kinds();
  kinds.push_back(KernelizedRpe{.features = 8, .seed = 4, .algorithm = RpeAlgorithm::kFft});
  const index_t n = kDispatchLength;
  const AttentionShape shapes[] = {{1, 4, 4, n, n, 16, 24}, {2, 4, 4, n, n, 40, 8}, {1, 4, 4, n, n, 5, 33}};
  const int thread_counts[] = {1, 2, 3, 0};
  std::vector<Job> jobs;
  for (std::size_t kind = 0; kind < kinds.size(); ++kind) {
    for (std::size_t shape = 0; shape < std::size(shapes); ++shape) {
      const std::size_t index = jobs.size();
      const bool rpe = std::holds_alternative<KernelizedRpe>(kinds[kind]);
      jobs.push_back(Job{kinds[kind], make_problem<float>(shapes[shape], InputSet::kNormal, 100 + index),
                         static_cast<Elements>(index % 3), thread_counts[index % 4], index % 4 == 3, !rpe,
                         "kind " + std::to_string(kind) + " shape " + std::to_string(shape)});
    }
  }
  return jobs;
}

TEST(ConcurrentCallers, EightThreadsGiveTheBitsOfOneCallAlone) {
  const std::vector<Job> jobs = make_jobs();
  std::vector<Result> expected;
  for (const Job& job : jobs) expected.push_back(run(job, 1));

  std::vector<std::vector<std::string>> mismatches(kCallers);
  std::atomic<int> calls{0};
  std::latch start(kCallers);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      start.arrive_and_wait();
      for (int round = 0; round < kRounds; ++round) {
        // Each caller walks the jobs from its own offset, so different kinds run at once.
        for (std::size_t step = 0; step < jobs.size(); step += 2) {
          const std::size_t j =
              (step + static_cast<std::size_t>(c) * 5 + static_cast<std::size_t>(round)) % jobs.size();
          const Job& job = jobs[j];
          if (!job.inside_region) {
            if (!same_bits(run(job, job.threads), expected[j])) mismatches[c].push_back(job.name);
            calls.fetch_add(1, std::memory_order_relaxed);
            continue;
          }
          // Every member of the region makes the call (attnkit runs it on the member's thread).
          std::vector<int> member_matches(kRegionThreads, -1);  // -1: the member did not run
#pragma omp parallel num_threads(kRegionThreads)
          member_matches[static_cast<std::size_t>(omp_get_thread_num())] =
              same_bits(run(job, job.threads), expected[j]) ? 1 : 0;
          for (int match : member_matches) {
            if (match == 0) mismatches[c].push_back(job.name + " (inside a region)");
            if (match >= 0) calls.fetch_add(1, std::memory_order_relaxed);
          }
        }
      }
    });
  }
  for (std::thread& caller : callers) caller.join();

  EXPECT_GT(calls.load(), kCallers * kRounds * static_cast<int>(jobs.size()) / 2);
  for (int c = 0; c < kCallers; ++c) {
    for (const std::string& name : mismatches[c])
      ADD_FAILURE() << "caller " << c << ": " << name << " differs from the call alone";
  }
}

}  // namespace
}  // namespace attnkit::testing
