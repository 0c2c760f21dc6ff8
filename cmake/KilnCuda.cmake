# KILN_CUDA=AUTO|ON|OFF decides whether the CUDA backend is built. CMake 3.25 finds nvcc only on
# PATH, CUDACXX or CUDA_PATH, so AUTO also looks at /usr/local/cuda/bin/nvcc.
# KILN_CUDA=EMULATE builds the backend with its .cu sources compiled as C++ against kiln's CUDA
# emulator (cuda_emulator/, test-only): no CUDA toolkit, no CUDA language.
set(KILN_WITH_CUDA OFF)
set(KILN_CUDA_EMULATED OFF)
if(KILN_CUDA STREQUAL "EMULATE")
  set(KILN_WITH_CUDA ON)
  set(KILN_CUDA_EMULATED ON)
elseif(NOT KILN_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(KILN_NVCC nvcc PATHS /usr/local/cuda/bin ENV CUDA_PATH PATH_SUFFIXES bin)
    if(KILN_NVCC)
      set(CMAKE_CUDA_COMPILER ${KILN_NVCC})
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(KILN_WITH_CUDA ON)
  elseif(KILN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "kiln: KILN_CUDA=ON but no CUDA compiler was found (looked on PATH, "
                        "CUDACXX, CUDA_PATH and /usr/local/cuda/bin/nvcc)")
  endif()
endif()
if(KILN_CUDA_EMULATED)
  message(STATUS "kiln: CUDA backend ON, emulated on the CPU (KILN_CUDA=EMULATE, a test build: "
                 "docs/cuda-emulator.md)")
elseif(KILN_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90-real 75-virtual)  # sm_90 machine code + compute_75 PTX
  endif()
  # One shared CUDA runtime for the library and every program that links it.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
  # CMake 3.25 knows nvcc's -std flags only up to C++17 (and a standard set before
  # enable_language breaks its compiler check); nvcc >= 12 takes -std=c++20.
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "kiln: CUDA backend ON (KILN_CUDA=${KILN_CUDA}, ${CMAKE_CUDA_COMPILER}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "kiln: CUDA backend OFF (KILN_CUDA=${KILN_CUDA})")
endif()
