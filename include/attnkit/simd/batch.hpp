#pragma once
// The SIMD vocabulary of attnkit: the xsimd batch of the build's widest instruction set.
// Only headers under simd/ include xsimd; everything else sees these aliases and functions.

#include <cstddef>

#include <xsimd/xsimd.hpp>

namespace attnkit::simd {

/// xsimd batch of the widest instruction set enabled at compile time (AVX-512 with
/// -march=native on this project's machines; SSE2 for a plain x86-64 build).
template <class T>
using Batch = xsimd::batch<T>;

/// Lanes of Batch<T>.
template <class T>
inline constexpr std::size_t kWidth = Batch<T>::size;

/// Name of the instruction set Batch<T> compiles to ("avx512bw", "sse2", ...).
inline const char* arch_name() { return xsimd::default_arch::name(); }

}  // namespace attnkit::simd
