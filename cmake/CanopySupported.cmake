# SPDX-License-Identifier: Apache-2.0
# The supported toolchains (README.md, "Supported platforms") as one function, so that the refusal
# of an older one is tested without that toolchain (tests/cpu/install/platform_checks.cmake):
#   canopy_require_supported(CXX  <compiler id> <version> <compiler path>)   GCC 11+ or Clang 14+
#   canopy_require_supported(CUDA <compiler id> <version> <compiler path>)   nvcc of CUDA 12.0+
# Fails the configure with one line naming the compiler, its version and what to do; other C++
# compilers get a warning (built and tested with GCC and Clang only).
function(canopy_require_supported language id version compiler)
  if(language STREQUAL "CXX")
    if(id STREQUAL "GNU" AND version VERSION_LESS 11)
      message(FATAL_ERROR "Canopy needs GCC 11 or newer (C++20); ${compiler} is GCC ${version}. "
                          "Set CMAKE_CXX_COMPILER to a newer compiler.")
    elseif(id STREQUAL "Clang" AND version VERSION_LESS 14)
      message(FATAL_ERROR "Canopy needs Clang 14 or newer (C++20); ${compiler} is Clang ${version}. "
                          "Set CMAKE_CXX_COMPILER to a newer compiler.")
    elseif(NOT id MATCHES "^(GNU|Clang)$")
      message(WARNING "Canopy is built and tested with GCC and Clang only, not ${id}")
    endif()
  elseif(language STREQUAL "CUDA")
    if(NOT id STREQUAL "NVIDIA")
      message(FATAL_ERROR "Canopy's GPU parts need nvcc; the CUDA compiler is ${id}")
    endif()
    if(version VERSION_LESS 12.0)
      message(FATAL_ERROR "Canopy needs CUDA 12.0 or newer; ${compiler} is CUDA ${version}. Point "
                          "CMAKE_CUDA_COMPILER at a newer nvcc, or configure with -DCANOPY_GPU=OFF.")
    endif()
  else()
    message(FATAL_ERROR "canopy_require_supported: unknown language '${language}'")
  endif()
endfunction()
