# SPDX-License-Identifier: Apache-2.0
# CMake before 3.26 knows no C++20 flag for nvcc (and so no cuda_std_20 compile feature). Canopy's
# targets ask for cuda_std_20 on the CUDA files that use them; this file teaches CMake the flag.
# Included by Canopy's own build before it enables CUDA, and by the installed package config, so a
# consumer gets it whether it enables CUDA before or after find_package(canopy). A CMake that
# knows the flag already is left alone.
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  # Read when CUDA is enabled: the compiler's features are then recorded with cuda_std_20.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
if(CMAKE_CUDA_COMPILER_LOADED AND CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA"
   AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0
   AND NOT "cuda_std_20" IN_LIST CMAKE_CUDA_COMPILE_FEATURES)
  # CUDA was enabled before this file was read: add the feature it could not record then.
  list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
  set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
endif()
