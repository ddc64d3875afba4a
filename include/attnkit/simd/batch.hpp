#pragma once
// The SIMD vocabulary of attnkit: the xsimd batch of the build's widest instruction set.
// Only headers under simd/ include xsimd; everything else sees these aliases and functions.

#include <cstddef>

#include <xsimd/xsimd.hpp>

#include "attnkit/core/index.hpp"

namespace attnkit::simd {

/// xsimd batch of the widest instruction set enabled at compile time (AVX-512 with
/// -march=native on this project's machines; SSE2 for a plain x86-64 build).
template <class T>
using Batch = xsimd::batch<T>;

/// Lanes of Batch<T>.
template <class T>
inline constexpr std::size_t kWidth = Batch<T>::size;

/// Vector registers a micro-kernel may fill: 32 with AVX-512 (zmm0-31), 16 with SSE/AVX.
template <class T>
inline constexpr index_t kVectorRegisters = sizeof(Batch<T>) == 64 ? 32 : 16;

/// Keeps an already loaded batch in a register. Micro-kernels load a vector once and use it
/// for several FMAs; GCC otherwise folds the load into every one of those FMAs as a memory
/// operand, so the kernel issues a load per FMA and becomes load-port bound. An empty asm
/// with a register operand ("+v": any SIMD register) makes the value opaque, so it is loaded
/// exactly once. No instruction is emitted.
template <class T>
inline void keep_in_register(Batch<T>& value) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  asm("" : "+v"(value.data));
#else
  (void)value;
#endif
}

/// Name of the instruction set Batch<T> compiles to ("avx512bw", "sse2", ...).
inline const char* arch_name() { return xsimd::default_arch::name(); }

}  // namespace attnkit::simd
