# SPDX-License-Identifier: Apache-2.0
# Supported platforms (README.md, "Supported platforms"): GCC 11+ or Clang 14+ for host C++20;
# CUDA 12.0+ (nvcc) for the GPU parts; CMake 3.25+. Anything older fails here with one clear line
# instead of pages of template errors later.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 11)
  message(FATAL_ERROR "Canopy needs GCC 11 or newer (C++20); ${CMAKE_CXX_COMPILER} is GCC "
                      "${CMAKE_CXX_COMPILER_VERSION}. Set CMAKE_CXX_COMPILER to a newer compiler.")
elseif(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 14)
  message(FATAL_ERROR "Canopy needs Clang 14 or newer (C++20); ${CMAKE_CXX_COMPILER} is Clang "
                      "${CMAKE_CXX_COMPILER_VERSION}. Set CMAKE_CXX_COMPILER to a newer compiler.")
elseif(NOT CMAKE_CXX_COMPILER_ID MATCHES "^(GNU|Clang)$")
  message(WARNING "Canopy is built and tested with GCC and Clang only, not ${CMAKE_CXX_COMPILER_ID}")
endif()

if(CANOPY_GPU)
  include(${CMAKE_CURRENT_LIST_DIR}/CanopyCudaDialect.cmake)
  if(NOT CMAKE_CUDA_COMPILER_LOADED)
    include(CheckLanguage)
    check_language(CUDA)
    if(NOT CMAKE_CUDA_COMPILER)
      message(FATAL_ERROR "CANOPY_GPU is ON but no CUDA compiler was found: install CUDA 12 or newer "
                          "(nvcc), set CMAKE_CUDA_COMPILER, or configure with -DCANOPY_GPU=OFF")
    endif()
    enable_language(CUDA)
  endif()
  if(NOT CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA")
    message(FATAL_ERROR "Canopy's GPU parts need nvcc; the CUDA compiler is ${CMAKE_CUDA_COMPILER_ID}")
  endif()
  if(CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 12.0)
    message(FATAL_ERROR "Canopy needs CUDA 12.0 or newer; ${CMAKE_CUDA_COMPILER} is CUDA "
                        "${CMAKE_CUDA_COMPILER_VERSION}. Point CMAKE_CUDA_COMPILER at a newer nvcc, or "
                        "configure with -DCANOPY_GPU=OFF.")
  endif()
  include(${CMAKE_CURRENT_LIST_DIR}/CanopyCudaDialect.cmake)  # CUDA was on already (a parent project)
endif()
