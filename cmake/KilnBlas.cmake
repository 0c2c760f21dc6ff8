# KILN_BLAS picks the CPU GEMM: openblas (Debian's OpenMP OpenBLAS, loaded at run time by its own
# path with the right kernels chosen first: core/cpu/openblas.h), eigen (Eigen's own GEMM), or
# AUTO (openblas when libopenblas0-openmp is installed). Eigen stays the fallback at run time.
find_library(KILN_OPENBLAS NAMES openblas
             PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp NO_DEFAULT_PATH)
if(KILN_BLAS STREQUAL "AUTO")
  set(_kiln_use_openblas ${KILN_OPENBLAS})
elseif(KILN_BLAS STREQUAL "openblas")
  if(NOT KILN_OPENBLAS)
    message(FATAL_ERROR "kiln: KILN_BLAS=openblas needs libopenblas0-openmp "
                        "(/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp/libopenblas.so)")
  endif()
  set(_kiln_use_openblas ON)
elseif(KILN_BLAS STREQUAL "eigen")
  set(_kiln_use_openblas OFF)
else()
  message(FATAL_ERROR "kiln: KILN_BLAS must be AUTO, openblas or eigen, not '${KILN_BLAS}'")
endif()
if(_kiln_use_openblas)
  get_filename_component(_kiln_openblas_real ${KILN_OPENBLAS} REALPATH)
  set_source_files_properties(core/cpu/openblas.cpp PROPERTIES
                              COMPILE_DEFINITIONS "KILN_OPENBLAS_PATH=\"${_kiln_openblas_real}\"")
  target_link_libraries(kiln PRIVATE ${CMAKE_DL_LIBS})
  message(STATUS "kiln: CPU GEMM through OpenBLAS (${_kiln_openblas_real}), Eigen as fallback")
else()
  message(STATUS "kiln: CPU GEMM through Eigen")
endif()
