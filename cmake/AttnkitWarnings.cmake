# attnkit_configure_target(<target> [NATIVE <ON|OFF>])
# Warnings (as errors) for code built inside this repository, and -march=native when asked.
include(CheckCXXCompilerFlag)
check_cxx_compiler_flag(-march=native ATTNKIT_HAS_MARCH_NATIVE)

function(attnkit_configure_target target)
  cmake_parse_arguments(ARG "" "NATIVE" "" ${ARGN})
  if(NOT DEFINED ARG_NATIVE)
    set(ARG_NATIVE ${ATTNKIT_NATIVE})
  endif()
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Werror)
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
