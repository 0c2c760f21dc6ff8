# KILN_BLAS decides which BLAS libraries the CPU GEMM may load at run time (core/cpu/blas_library.h):
# AUTO (each of Debian's OpenMP OpenBLAS and BLIS that is installed), openblas or blis (that one,
# required), eigen (none: Eigen's own GEMM). kiln loads them by the path of the runtime packages'
# files (libopenblas0-openmp, libblis4-openmp): the unversioned libopenblas.so comes only with a
# -dev package, which a fresh machine need not have.
set(_kiln_blas_dir /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
find_file(KILN_OPENBLAS_LIBRARY libopenblas.so.0 PATHS ${_kiln_blas_dir}/openblas-openmp
          NO_DEFAULT_PATH NO_CACHE)
find_file(KILN_BLIS_LIBRARY libblis.so.4 PATHS ${_kiln_blas_dir}/blis-openmp NO_DEFAULT_PATH
          NO_CACHE)
set(_kiln_blas_names openblas blis)
set(_kiln_openblas_package libopenblas0-openmp)
set(_kiln_blis_package libblis4-openmp)
if(KILN_BLAS STREQUAL "AUTO")
  set(_kiln_blas_wanted ${_kiln_blas_names})
elseif(KILN_BLAS IN_LIST _kiln_blas_names)
  set(_kiln_blas_wanted ${KILN_BLAS})
  string(TOUPPER ${KILN_BLAS} _kiln_upper)
  if(NOT KILN_${_kiln_upper}_LIBRARY)
    message(FATAL_ERROR "kiln: KILN_BLAS=${KILN_BLAS} needs Debian's ${_kiln_${KILN_BLAS}_package}")
  endif()
elseif(KILN_BLAS STREQUAL "eigen")
  set(_kiln_blas_wanted "")
else()
  message(FATAL_ERROR "kiln: KILN_BLAS must be AUTO, openblas, blis or eigen, not '${KILN_BLAS}'")
endif()
set(_kiln_blas_found "")
foreach(_kiln_name IN LISTS _kiln_blas_wanted)
  string(TOUPPER ${_kiln_name} _kiln_upper)
  if(KILN_${_kiln_upper}_LIBRARY)
    set_property(SOURCE core/cpu/blas_library.cpp APPEND PROPERTY COMPILE_DEFINITIONS
                 "KILN_${_kiln_upper}_PATH=\"${KILN_${_kiln_upper}_LIBRARY}\"")
    list(APPEND _kiln_blas_found "${_kiln_name} (${KILN_${_kiln_upper}_LIBRARY})")
  elseif(KILN_BLAS STREQUAL "AUTO")
    message(STATUS "kiln: ${_kiln_name} not installed (Debian's ${_kiln_${_kiln_name}_package})")
  endif()
endforeach()
if(_kiln_blas_found)
  target_link_libraries(kiln_core PRIVATE ${CMAKE_DL_LIBS})
  list(JOIN _kiln_blas_found ", " _kiln_blas_found)
  message(STATUS "kiln: CPU GEMM through ${_kiln_blas_found}; Eigen as fallback")
else()
  message(STATUS "kiln: CPU GEMM through Eigen only (KILN_BLAS=${KILN_BLAS})")
endif()
