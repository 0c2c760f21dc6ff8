# The communicator's backends (distributed/). KILN_MPI=AUTO|ON|OFF decides the MPI backend as KILN_CUDA
# decides CUDA: AUTO builds it when an MPI (Debian: libopenmpi-dev) is found, ON requires one.
# The NCCL backend comes with the CUDA backend when nccl.h and libnccl are found beside the CUDA
# toolkit (/usr/local/cuda here); KILN_CUDA=EMULATE has no NCCL.
# kiln calls MPI's C API from C++: the CXX component, without the deprecated C++ bindings (it
# also works for consumers whose projects enable no C compiler).
set(KILN_WITH_MPI OFF)
if(NOT KILN_MPI STREQUAL "OFF")
  set(MPI_CXX_SKIP_MPICXX ON)
  if(KILN_MPI STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS CXX)
  else()
    find_package(MPI QUIET COMPONENTS CXX)
  endif()
  if(MPI_CXX_FOUND)
    set(KILN_WITH_MPI ON)
  endif()
endif()
if(KILN_WITH_MPI)
  message(STATUS "kiln: MPI backend ON (KILN_MPI=${KILN_MPI}, MPI ${MPI_CXX_VERSION}, "
                 "${MPIEXEC_EXECUTABLE})")
else()
  message(STATUS "kiln: MPI backend OFF (KILN_MPI=${KILN_MPI})")
endif()

set(KILN_WITH_NCCL OFF)
if(KILN_WITH_CUDA AND NOT KILN_CUDA STREQUAL "EMULATE")
  find_path(KILN_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(KILN_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(KILN_NCCL_INCLUDE_DIR AND KILN_NCCL_LIBRARY)
    set(KILN_WITH_NCCL ON)
  endif()
endif()
message(STATUS "kiln: NCCL backend ${KILN_WITH_NCCL}")
