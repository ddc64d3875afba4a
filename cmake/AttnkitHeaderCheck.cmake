# attnkit_header_check: every header under include/attnkit compiles on its own (and twice in
# one translation unit): one generated source per header, compiled at -O0 (parsing is the
# cost, about 2.4 s a header). Built by the fuzz preset (clang) in CI, and wherever
# ATTNKIT_HEADER_CHECK=ON; a compile-only check, so the test preset leaves it to that build.
file(GLOB_RECURSE attnkit_headers RELATIVE "${PROJECT_SOURCE_DIR}/include" CONFIGURE_DEPENDS
     "${PROJECT_SOURCE_DIR}/include/attnkit/*.hpp")
set(attnkit_header_check_sources)
foreach(header IN LISTS attnkit_headers)
  string(MAKE_C_IDENTIFIER "${header}" stem)
  set(source "${PROJECT_BINARY_DIR}/header_check/${stem}.cpp")
  file(CONFIGURE OUTPUT "${source}" CONTENT "#include \"${header}\"\n#include \"${header}\"\n")
  list(APPEND attnkit_header_check_sources "${source}")
endforeach()
add_library(attnkit_header_check OBJECT ${attnkit_header_check_sources})
target_link_libraries(attnkit_header_check PRIVATE attnkit::attnkit)
target_compile_options(attnkit_header_check PRIVATE -O0)
attnkit_configure_target(attnkit_header_check)
