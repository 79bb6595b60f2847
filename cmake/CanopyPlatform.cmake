# SPDX-License-Identifier: Apache-2.0
# Supported platforms (README.md, "Supported platforms"): GCC 11+ or Clang 14+ for host C++20;
# CUDA 12.0+ (nvcc) for the GPU parts; CMake 3.25+. Anything older fails here with one clear line
# instead of pages of template errors later.
include(${CMAKE_CURRENT_LIST_DIR}/CanopySupported.cmake)
canopy_require_supported(CXX "${CMAKE_CXX_COMPILER_ID}" "${CMAKE_CXX_COMPILER_VERSION}" "${CMAKE_CXX_COMPILER}")

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
  canopy_require_supported(CUDA "${CMAKE_CUDA_COMPILER_ID}" "${CMAKE_CUDA_COMPILER_VERSION}" "${CMAKE_CUDA_COMPILER}")
  include(${CMAKE_CURRENT_LIST_DIR}/CanopyCudaDialect.cmake)  # CUDA was on already (a parent project)
endif()
