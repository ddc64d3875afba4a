# attnkit::dispatch: every kind of attnkit compiled once per x86-64 level (src/dispatch/
# target_kernels.cpp with -march=x86-64, x86-64-v3, x86-64-v4) plus the dispatcher that picks
# one at run time (src/dispatch/dispatcher.cpp, baseline flags). A static library.
#
# Why each target's object is linked on its own first: the kernels instantiate inline
# functions (attnkit's, xsimd's for the baseline, the standard library's) whose names are the
# same in every target, and the final link keeps one copy of each; if it kept an AVX-512 copy,
# an AVX2 or SSE2 machine would fault on it. So each target's object is relinked alone
# (ld -r --force-group-allocation: its COMDAT copies become plain sections) and every symbol
# but its entry point (and the few process-wide objects below) is made local (objcopy
# --keep-global-symbol).

find_program(ATTNKIT_OBJCOPY NAMES objcopy llvm-objcopy REQUIRED)
find_program(ATTNKIT_LD NAMES ld ld.bfd REQUIRED)
execute_process(COMMAND "${ATTNKIT_LD}" --help OUTPUT_VARIABLE attnkit_ld_help ERROR_QUIET)
if(NOT attnkit_ld_help MATCHES "--force-group-allocation")
  message(FATAL_ERROR "ATTNKIT_DISPATCH needs GNU ld >= 2.29 (binutils) for ld -r --force-group-allocation; "
                      "found ${ATTNKIT_LD}. Install binutils or configure with -DATTNKIT_DISPATCH=OFF")
endif()

set(attnkit_dispatch_targets sse2 avx2 avx512)
set(attnkit_dispatch_march_sse2 x86-64)
set(attnkit_dispatch_march_avx2 x86-64-v3)
set(attnkit_dispatch_march_avx512 x86-64-v4)

# State that must stay one per process: FFTW's planner lock (kernel/fftw_engine.hpp).
set(attnkit_shared_symbols _ZZN7attnkit6kernel17fftw_planner_lockEvE4lock)

set(attnkit_dispatch_objects)
foreach(target IN LISTS attnkit_dispatch_targets)
  set(objects attnkit_dispatch_${target}_objects)
  add_library(${objects} OBJECT src/dispatch/target_kernels.cpp)
  target_link_libraries(${objects} PRIVATE attnkit)
  target_compile_definitions(${objects} PRIVATE ATTNKIT_DISPATCH_TABLE=attnkit_dispatch_table_${target})
  # -fno-lto: ld -r needs machine code, not LTO bytecode. -fno-gnu-unique: GCC gives the
  # static variables of inline functions (per-thread scratch, FFT plan caches) the binding
  # STB_GNU_UNIQUE, which objcopy cannot make local; weak, they are localised like the code,
  # so each target has its own (their contents depend on the vector width).
  target_compile_options(${objects} PRIVATE -march=${attnkit_dispatch_march_${target}} -fno-lto)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${objects} PRIVATE -fno-gnu-unique)
  endif()
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND NOT target STREQUAL "sse2")
    # GCC 12 reports the deliberately undefined operands of its own AVX-512/AVX2 intrinsics
    # (reached through xsimd) as maybe-uninitialized (see AttnkitWarnings.cmake).
    target_compile_options(${objects} PRIVATE -Wno-uninitialized -Wno-maybe-uninitialized)
  endif()
  set_target_properties(${objects} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  if(COMMAND attnkit_configure_target)
    attnkit_configure_target(${objects} NATIVE OFF)
  endif()
  set(isolated "${CMAKE_CURRENT_BINARY_DIR}/attnkit_dispatch_${target}.o")
  add_custom_command(
    OUTPUT "${isolated}"
    COMMAND "${ATTNKIT_LD}" -r --force-group-allocation -o "${isolated}.relinked" "$<TARGET_OBJECTS:${objects}>"
    COMMAND "${ATTNKIT_OBJCOPY}" --keep-global-symbol=attnkit_dispatch_table_${target}
            --keep-global-symbol=${attnkit_shared_symbols} "${isolated}.relinked" "${isolated}"
    DEPENDS ${objects} "$<TARGET_OBJECTS:${objects}>"
    COMMAND_EXPAND_LISTS VERBATIM
    COMMENT "Isolating the ${target} kernels of attnkit::dispatch")
  list(APPEND attnkit_dispatch_objects "${isolated}")
endforeach()

add_library(attnkit_dispatch STATIC src/dispatch/dispatcher.cpp ${attnkit_dispatch_objects})
set_source_files_properties(${attnkit_dispatch_objects} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
target_link_libraries(attnkit_dispatch PUBLIC attnkit)
set_target_properties(attnkit_dispatch PROPERTIES EXPORT_NAME dispatch POSITION_INDEPENDENT_CODE ON)
add_library(attnkit::dispatch ALIAS attnkit_dispatch)
if(COMMAND attnkit_configure_target)
  attnkit_configure_target(attnkit_dispatch NATIVE OFF)
endif()
