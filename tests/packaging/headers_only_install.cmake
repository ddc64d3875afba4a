# cmake -DSOURCE_DIR=<attnkit> -DBUILD_DIR=<scratch> -DPREFIX=<prefix> -P headers_only_install.cmake
# The install a user makes without building anything (README "Use", the install preset's
# options): configure with every compiled part off, then cmake --install straight away.
foreach(step IN ITEMS configure install)
  if(step STREQUAL "configure")
    set(command "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${BUILD_DIR}" -DCMAKE_BUILD_TYPE=Release
                -DATTNKIT_BUILD_TESTS=OFF -DATTNKIT_BUILD_BENCHMARKS=OFF -DATTNKIT_BUILD_EXAMPLES=OFF
                -DATTNKIT_DISPATCH=OFF -DATTNKIT_FFTW=OFF)
  else()
    set(command "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}")
  endif()
  execute_process(COMMAND ${command} RESULT_VARIABLE failed OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(failed)
    message(FATAL_ERROR "headers-only ${step} failed:\n${output}")
  endif()
endforeach()
if(EXISTS "${PREFIX}/lib/libattnkit_dispatch.a" OR NOT EXISTS "${PREFIX}/include/attnkit/attnkit.hpp")
  message(FATAL_ERROR "a headers-only install holds the headers and no compiled library")
endif()
