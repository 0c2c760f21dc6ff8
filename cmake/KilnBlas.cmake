# KILN_BLAS=openblas: Eigen's products call Debian's OpenMP OpenBLAS (EIGEN_USE_BLAS). It is
# linked by its own path: on these machines libblas.so.3 may point at the slow reference BLAS.
if(KILN_BLAS STREQUAL "openblas")
  find_library(KILN_OPENBLAS NAMES openblas
               PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp NO_DEFAULT_PATH)
  if(NOT KILN_OPENBLAS)
    message(FATAL_ERROR "kiln: KILN_BLAS=openblas needs libopenblas0-openmp "
                        "(/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp/libopenblas.so)")
  endif()
  target_compile_definitions(kiln PRIVATE EIGEN_USE_BLAS KILN_OPENBLAS=1)
  target_link_libraries(kiln PRIVATE ${KILN_OPENBLAS})
  message(STATUS "kiln: CPU GEMM through OpenBLAS (${KILN_OPENBLAS})")
elseif(KILN_BLAS STREQUAL "eigen")
  message(STATUS "kiln: CPU GEMM through Eigen")
else()
  message(FATAL_ERROR "kiln: KILN_BLAS must be eigen or openblas, not '${KILN_BLAS}'")
endif()
