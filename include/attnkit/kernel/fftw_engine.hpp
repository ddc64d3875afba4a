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

#include <fftw3.h>

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "attnkit/detail/aligned_buffer.hpp"
#include "attnkit/kernel/toeplitz_fft.hpp"
#include "attnkit/simd/batch.hpp"

namespace attnkit::kernel {

/// FFTW's single- and double-precision APIs under one name.
template <class T>
struct FftwApi;
template <>
struct FftwApi<float> {
  using Plan = fftwf_plan;
  using Dim = fftwf_iodim;
  static Plan plan(const Dim& dim, const Dim& lanes, float* re, float* im, unsigned flags) {
    return fftwf_plan_guru_split_dft(1, &dim, 1, &lanes, re, im, re, im, flags);
  }
  static void execute(Plan plan, float* re, float* im) { fftwf_execute_split_dft(plan, re, im, re, im); }
  static void destroy(Plan plan) { fftwf_destroy_plan(plan); }
};
template <>
struct FftwApi<double> {
  using Plan = fftw_plan;
  using Dim = fftw_iodim;
  static Plan plan(const Dim& dim, const Dim& lanes, double* re, double* im, unsigned flags) {
    return fftw_plan_guru_split_dft(1, &dim, 1, &lanes, re, im, re, im, flags);
  }
  static void execute(Plan plan, double* re, double* im) { fftw_execute_split_dft(plan, re, im, re, im); }
  static void destroy(Plan plan) { fftw_destroy_plan(plan); }
};

/// The FFTW backend of KernelizedRpe (RpeFft::kFftw): guru split-array plans transform all W
/// lanes of a batch in place, reading the batch's layout directly (point stride 2 W, lane
/// stride 1, real parts then imaginary parts). The inverse is the forward transform with the
/// real and imaginary arrays swapped (FFTW's documented identity); it has a plan of its own,
/// as a plan may only run on arrays laid out like those it was made on. Spectra in natural
/// order.
/// Plans are made with FFTW_MEASURE on scratch arrays of the batch's layout and alignment,
/// once per length for the life of the process, under a lock (FFTW's planner is not
/// thread-safe; executing a plan is). Calls in one process share the plans, so results do
/// not depend on the thread count; another process may time its way to other plans and
/// differ in the last bits.
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
      FftwApi<T>::execute(plans_.forward, data, data + kW);
      for (index_t f = 0; f < length_; ++f) {
        simd::FftPoint<simd::Batch<T>>::load(data + 2 * kW * f).times(spectrum + 2 * f).store(data + 2 * kW * f);
      }
      FftwApi<T>::execute(plans_.inverse, data + kW, data);
    });
  }

 private:
  static constexpr index_t kW = static_cast<index_t>(simd::kWidth<T>);
  using Plan = typename FftwApi<T>::Plan;
  struct Plans {
    Plan forward, inverse;
  };

  /// The process's plans, destroyed at exit.
  struct PlanCache {
    std::mutex lock;
    std::map<index_t, Plans> plans;
    ~PlanCache() {
      for (const auto& [length, pair] : plans) {
        FftwApi<T>::destroy(pair.forward);
        FftwApi<T>::destroy(pair.inverse);
      }
    }
  };

  static Plans plans_for(index_t length) {
    static PlanCache cache;
    const std::lock_guard<std::mutex> guard(cache.lock);
    if (const auto found = cache.plans.find(length); found != cache.plans.end()) return found->second;
    attnkit::detail::AlignedBuffer<T> scratch(2 * kW * length);
    const typename FftwApi<T>::Dim dim{static_cast<int>(length), static_cast<int>(2 * kW), static_cast<int>(2 * kW)};
    const typename FftwApi<T>::Dim lanes{static_cast<int>(kW), 1, 1};
    T* const re = scratch.data();
    T* const im = scratch.data() + kW;
    const Plans plans{FftwApi<T>::plan(dim, lanes, re, im, FFTW_MEASURE), FftwApi<T>::plan(dim, lanes, im, re, FFTW_MEASURE)};
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
