// A downstream program: every registered kind (KernelizedRpe with each FFT engine the package
// offers) through the installed or embedded attnkit, checked against the float64 reference,
// and, when the package holds it, the same calls through attnkit::dispatch. Exit code 0 when
// they all agree (and link: an engine the package turns on must come with its library).
#include <attnkit/attnkit.hpp>
#if ATTNKIT_CONSUMER_DISPATCH
#include <attnkit/dispatch.hpp>
#endif

#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr long kLength = 100, kHeads = 2, kDim = 16;

/// One pattern of every kind, several KernelizedRpe engines.
std::vector<attnkit::AnyKind> one_of_each_kind() {
  attnkit::Lsh lsh;
  lsh.chunk = 16;
  std::vector<attnkit::AnyKind> kinds{attnkit::Full{.causal = true},
                                      attnkit::SlidingWindow::symmetric(8),
                                      attnkit::Dilated::symmetric(4, {1, 2}),
                                      attnkit::Global({0, 50}),
                                      attnkit::BlockSparse::local(16, 7, true),
                                      attnkit::BigBird(16, 1, 3),
                                      attnkit::Linformer::gaussian(32, kLength, 1, 7),
                                      lsh};
  std::vector<attnkit::RpeFft> engines{attnkit::RpeFft::kLanes, attnkit::RpeFft::kEigen};
#if ATTNKIT_WITH_FFTW
  engines.push_back(attnkit::RpeFft::kFftw);
#endif
  for (attnkit::RpeFft engine : engines) {
    kinds.push_back(
        attnkit::KernelizedRpe{.features = 16, .seed = 3, .algorithm = attnkit::RpeAlgorithm::kFft, .fft = engine});
  }
  return kinds;
}

}  // namespace

int main() {
  const long size = kHeads * kLength * kDim;
  std::vector<float> q(size), v(size), out(size), ref(size);
  for (long i = 0; i < size; ++i) {
    q[i] = std::sin(0.37f * static_cast<float>(i));
    v[i] = std::sin(0.05f * static_cast<float>(i));
  }
  const auto view = [&](std::vector<float>& x) { return attnkit::bhld(x.data(), 1, kHeads, kLength, kDim); };
  // q also serves as k: Lsh attends with shared query-key vectors.
  const attnkit::TensorView<const float> qk = view(q), values = view(v);
  float worst = 0;
  std::set<std::string> kinds_called;
  for (const attnkit::AnyKind& kind : one_of_each_kind()) {
    const std::string name(attnkit::Kinds::names[kind.index()]);
    kinds_called.insert(name);
    attnkit::reference::attention(kind, qk, qk, values, view(ref));
    out.assign(out.size(), 1e30f);  // so that a call writing nothing fails
    attnkit::attention(kind, qk, qk, values, view(out));
    float error = 0;
    for (long i = 0; i < size; ++i) error = std::fmax(error, std::fabs(out[i] - ref[i]));
#if ATTNKIT_CONSUMER_DISPATCH
    out.assign(out.size(), 1e30f);
    attnkit::dispatch::attention(kind, qk, qk, values, view(out));
    for (long i = 0; i < size; ++i) error = std::fmax(error, std::fabs(out[i] - ref[i]));
#endif
    std::printf("consumer: %-14s max |attnkit - reference| = %g\n", name.c_str(), static_cast<double>(error));
    worst = std::fmax(worst, error);
  }
#if ATTNKIT_CONSUMER_DISPATCH
  std::printf("consumer: attnkit::dispatch ran on %s too\n",
              attnkit::simd_target_name(attnkit::dispatch::simd_target()).data());
#endif
  if (kinds_called.size() != attnkit::Kinds::size) {
    std::printf("consumer: called %zu of the %zu kinds\n", kinds_called.size(), attnkit::Kinds::size);
    return 1;
  }
  // KernelizedRpe estimates softmax with 16 random features; the reference is its own closed
  // form (the same features), so every kind agrees to float rounding.
  return worst < 1e-4f ? 0 : 1;
}
