#pragma once
// What the running x86-64 CPU and its operating system can execute, as the x86-64 psABI's
// micro-architecture levels (x86-64-v3: AVX2 + FMA; x86-64-v4: AVX-512 F/BW/CD/DQ/VL), from
// CPUID and XGETBV. attnkit::dispatch picks its kernels with it.

#include <cstdint>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace attnkit::simd {

/// The instruction-set levels the CPU supports and the OS has enabled (it saves the wider
/// registers on a context switch: XCR0). Every x86-64 CPU runs the baseline (SSE2).
struct CpuLevels {
  bool x86_64_v3 = false;  ///< AVX, AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE (+ x86-64-v2), OS-enabled YMM
  bool x86_64_v4 = false;  ///< x86_64_v3 + AVX-512 F, BW, CD, DQ, VL, OS-enabled ZMM and opmasks
};

/// Reads CPUID leaves 1, 7 and 0x80000001 and XCR0. Not x86-64 (or a compiler without
/// <cpuid.h>): no level beyond the baseline.
inline CpuLevels detect_cpu_levels() {
  CpuLevels levels;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0 || eax < 7) return levels;
  const auto bit = [](unsigned reg, int b) { return ((reg >> b) & 1u) != 0; };

  __get_cpuid(1, &eax, &ebx, &ecx, &edx);
  const unsigned leaf1_ecx = ecx;
  const bool v2 = bit(ecx, 0) && bit(ecx, 9) && bit(ecx, 13) && bit(ecx, 19) && bit(ecx, 20) &&
                  bit(ecx, 23);  // SSE3, SSSE3, CX16, SSE4.1, SSE4.2, POPCNT
  const bool osxsave = bit(leaf1_ecx, 27);
  if (!v2 || !osxsave) return levels;

  // XCR0: bit 1 SSE state, 2 AVX (upper YMM), 5 opmask, 6 upper ZMM0-15, 7 ZMM16-31.
  std::uint32_t xcr0_low = 0, xcr0_high = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  const bool os_ymm = (xcr0_low & 0x6u) == 0x6u;
  const bool os_zmm = (xcr0_low & 0xE6u) == 0xE6u;

  __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx);
  const unsigned leaf7_ebx = ebx;
  if (__get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) == 0) return levels;
  const bool lahf_lzcnt = bit(ecx, 0) && bit(ecx, 5);

  levels.x86_64_v3 = os_ymm && lahf_lzcnt && bit(leaf1_ecx, 12) && bit(leaf1_ecx, 22) && bit(leaf1_ecx, 28) &&
                     bit(leaf1_ecx, 29) &&                                         // FMA, MOVBE, AVX, F16C
                     bit(leaf7_ebx, 3) && bit(leaf7_ebx, 5) && bit(leaf7_ebx, 8);  // BMI1, AVX2, BMI2
  levels.x86_64_v4 = levels.x86_64_v3 && os_zmm && bit(leaf7_ebx, 16) && bit(leaf7_ebx, 17) && bit(leaf7_ebx, 28) &&
                     bit(leaf7_ebx, 30) && bit(leaf7_ebx, 31);  // AVX-512 F, DQ, CD, BW, VL
#endif
  return levels;
}

}  // namespace attnkit::simd
