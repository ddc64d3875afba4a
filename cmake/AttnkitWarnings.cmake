# attnkit_configure_target(<target> [NATIVE <ON|OFF>])
# Warnings (as errors, unless ATTNKIT_WERROR is OFF) for code built inside this repository,
# and -march=native when asked.
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag(-march=native ATTNKIT_HAS_MARCH_NATIVE)
# The sanitize preset compiles at -O1, whose flow analysis warns differently from -O2's; the
# test preset (-O2) is the warning gate, so the sanitize preset reports warnings without
# failing on them.
option(ATTNKIT_WERROR "Treat warnings in attnkit's own targets as errors" ON)

function(attnkit_configure_target target)
  cmake_parse_arguments(ARG "" "NATIVE" "" ${ARGN})
  if(NOT DEFINED ARG_NATIVE)
    set(ARG_NATIVE ${ATTNKIT_NATIVE})
  endif()
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow $<$<BOOL:${ATTNKIT_WERROR}>:-Werror>)
  if(ARG_NATIVE AND ATTNKIT_HAS_MARCH_NATIVE)
    target_compile_options(${target} PRIVATE -march=native)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      # GCC 12 reports the deliberately undefined _mm512_undefined_* operands inside its own
      # AVX-512 intrinsics (reached through xsimd) as (maybe-)uninitialized: a false positive
      # in system headers, so these two warnings are off for -march=native builds only.
      target_compile_options(${target} PRIVATE -Wno-uninitialized -Wno-maybe-uninitialized)
    endif()
  endif()
endfunction()
