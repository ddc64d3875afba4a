#pragma once
// kernel::FftwEngine: ToeplitzBatch's convolutions by FFTW3 (GPL), compiled in only when
// ATTNKIT_WITH_FFTW is defined (the CMake option ATTNKIT_FFTW, off by default, defines it and
// links libfftw3f and libfftw3). Without it this header declares kHaveFftw = false only.

#include "attnkit/core/index.hpp"

namespace attnkit::kernel {

/// Whether this build has the FFTW backend (RpeFft::kFftw).
#if defined(ATTNKIT_WITH_FFTW)
inline constexpr bool kHaveFftw = true;
#else
inline constexpr bool kHaveFftw = false;
#endif

}  // namespace attnkit::kernel

#if defined(ATTNKIT_WITH_FFTW)

#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include <fftw3.h>

#include "attnkit/kernel/toeplitz_fft.hpp"
#include "attnkit/simd/batch.hpp"

namespace attnkit::kernel {

/// FFTW's allocation, failing as operator new does (std::bad_alloc) rather than with null.
template <class Pointer>
Pointer require_allocated(Pointer p) {
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

/// FFTW's single- and double-precision APIs under one name: plan_many_dft over `count`
/// contiguous interleaved complex sequences of `length`, in place.
template <class T>
struct FftwApi;
template <>
struct FftwApi<float> {
  using Plan = fftwf_plan;
  using Complex = fftwf_complex;
  static Plan plan(int length, int count, Complex* data, int sign, unsigned flags) {
    return fftwf_plan_many_dft(1, &length, count, data, nullptr, 1, length, data, nullptr, 1, length, sign, flags);
  }
  static void execute(Plan plan, Complex* data) { fftwf_execute_dft(plan, data, data); }
  static void destroy(Plan plan) { fftwf_destroy_plan(plan); }
  static Complex* allocate(index_t count) {
    return require_allocated(fftwf_alloc_complex(static_cast<std::size_t>(count)));
  }
  static void release(Complex* data) { fftwf_free(data); }
};
template <>
struct FftwApi<double> {
  using Plan = fftw_plan;
  using Complex = fftw_complex;
  static Plan plan(int length, int count, Complex* data, int sign, unsigned flags) {
    return fftw_plan_many_dft(1, &length, count, data, nullptr, 1, length, data, nullptr, 1, length, sign, flags);
  }
  static void execute(Plan plan, Complex* data) { fftw_execute_dft(plan, data, data); }
  static void destroy(Plan plan) { fftw_destroy_plan(plan); }
  static Complex* allocate(index_t count) {
    return require_allocated(fftw_alloc_complex(static_cast<std::size_t>(count)));
  }
  static void release(Complex* data) { fftw_free(data); }
};

/// The FFTW backend of KernelizedRpe (RpeFft::kFftw). FFTW runs best on contiguous
/// interleaved sequences (a split-array guru plan over the batch's own layout, point stride
/// 2 W, was as fast up to n = 16384 and 3x slower at n = 65536), so each convolution copies
/// the W lane sequences of the batch out to a per-thread [W x L] complex array
/// (FFTW-allocated, aligned for its SIMD codelets), runs one batched forward plan, the
/// natural-order spectrum product and one batched backward plan (unnormalised: the spectrum
/// carries 1 / L), and copies them back.
/// The copy doubles the engine's scratch (16 MiB more per thread at L = 2^17).
/// Plans are made with FFTW_MEASURE on a scratch array, once per length for the life of the
/// process, under a lock (FFTW's planner is not thread-safe; executing a plan on new arrays
/// of the same alignment is). Calls in one process share the plans, so results do not depend
/// on the thread count; another process may time its way to other plans and differ in the
/// last bits.
/// The process's one lock around FFTW's planner. Each FftwEngine<T> keeps its own plans, and
/// attnkit::dispatch holds one FftwEngine per instruction set (different lane counts), but all
/// of them plan through FFTW's single global planner: cmake/AttnkitDispatch.cmake keeps this
/// lock's symbol shared between the targets' otherwise private copies.
inline std::mutex& fftw_planner_lock() {
  static std::mutex lock;
  return lock;
}

template <class T>
class FftwEngine {
 public:
  static constexpr bool kBitReversedSpectrum = false;

  /// Plans (or finds) the transforms of `length` points; call before the parallel region.
  explicit FftwEngine(index_t length) : length_(length), plans_(plans_for(length)) {}
  index_t length() const { return length_; }

  template <class Source, class Sink>
  void convolve(T* data, const T* spectrum, index_t inputs, Source&& source, index_t outputs, Sink&& sink) const {
    buffered_convolve(data, length_, inputs, source, outputs, sink, [&] {
      Complex* lanes = thread_lanes(kW * length_);
      for (index_t p = 0; p < length_; ++p)
        for (index_t lane = 0; lane < kW; ++lane) {
          lanes[lane * length_ + p][0] = data[2 * kW * p + lane];
          lanes[lane * length_ + p][1] = data[2 * kW * p + kW + lane];
        }
      FftwApi<T>::execute(plans_.forward, lanes);
      for (index_t lane = 0; lane < kW; ++lane) {
        Complex* x = lanes + lane * length_;
        for (index_t f = 0; f < length_; ++f) {
          const T re = x[f][0] * spectrum[2 * f] - x[f][1] * spectrum[2 * f + 1];
          x[f][1] = x[f][0] * spectrum[2 * f + 1] + x[f][1] * spectrum[2 * f];
          x[f][0] = re;
        }
      }
      FftwApi<T>::execute(plans_.inverse, lanes);
      for (index_t p = 0; p < length_; ++p)
        for (index_t lane = 0; lane < kW; ++lane) {
          data[2 * kW * p + lane] = lanes[lane * length_ + p][0];
          data[2 * kW * p + kW + lane] = lanes[lane * length_ + p][1];
        }
    });
  }

 private:
  static constexpr index_t kW = static_cast<index_t>(simd::kWidth<T>);
  using Plan = typename FftwApi<T>::Plan;
  using Complex = typename FftwApi<T>::Complex;
  struct Plans {
    Plan forward, inverse;
  };

  /// The process's plans, destroyed at exit.
  struct PlanCache {
    std::map<index_t, Plans> plans;
    ~PlanCache() {
      for (const auto& [length, pair] : plans) {
        FftwApi<T>::destroy(pair.forward);
        FftwApi<T>::destroy(pair.inverse);
      }
    }
  };

  /// This thread's [W x L] array (grown, never shrunk, freed at thread exit).
  static Complex* thread_lanes(index_t count) {
    struct Lanes {
      Complex* data = nullptr;
      index_t size = 0;
      ~Lanes() { FftwApi<T>::release(data); }
    };
    thread_local Lanes lanes;
    if (lanes.size < count) {
      FftwApi<T>::release(lanes.data);
      lanes.data = FftwApi<T>::allocate(count);
      lanes.size = count;
    }
    return lanes.data;
  }

  static Plans plans_for(index_t length) {
    static PlanCache cache;
    const std::lock_guard<std::mutex> guard(fftw_planner_lock());
    if (const auto found = cache.plans.find(length); found != cache.plans.end()) return found->second;
    Complex* scratch = FftwApi<T>::allocate(kW * length);
    const int n = static_cast<int>(length), count = static_cast<int>(kW);
    const Plans plans{FftwApi<T>::plan(n, count, scratch, FFTW_FORWARD, FFTW_MEASURE),
                      FftwApi<T>::plan(n, count, scratch, FFTW_BACKWARD, FFTW_MEASURE)};
    FftwApi<T>::release(scratch);
    if (plans.forward == nullptr || plans.inverse == nullptr) {
      throw std::runtime_error("FFTW could not plan a transform of " + std::to_string(length) + " points");
    }
    return cache.plans.emplace(length, plans).first->second;
  }

  index_t length_;
  Plans plans_;
};

}  // namespace attnkit::kernel

#endif
