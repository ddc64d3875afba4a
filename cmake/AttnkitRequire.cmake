# attnkit_require(<Package> <debian-package> [find_package arguments...])
# find_package(<Package> ...) that stops configuration with the Debian package to install
# when the package is missing.
macro(attnkit_require package debian_package)
  find_package(${package} ${ARGN})
  if(NOT ${package}_FOUND)
    message(FATAL_ERROR "attnkit needs ${package}. On Debian/Ubuntu: apt-get install -y ${debian_package}")
  endif()
endmacro()

# Debian builds xsimd with xtl support: its xsimd target names the xtl target as a link
# dependency. Without xtl-dev that name becomes "-lxtl" and every link fails, so say so here.
function(attnkit_check_xsimd_links)
  get_target_property(xsimd_links xsimd INTERFACE_LINK_LIBRARIES)
  if(xsimd_links AND "xtl" IN_LIST xsimd_links AND NOT TARGET xtl)
    message(FATAL_ERROR "attnkit: this xsimd build requires xtl. On Debian/Ubuntu: apt-get install -y xtl-dev")
  endif()
endfunction()
