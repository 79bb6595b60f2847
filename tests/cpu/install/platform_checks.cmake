# SPDX-License-Identifier: Apache-2.0
# cmake -DSOURCE=<canopy sources> -P platform_checks.cmake
# The refusal of unsupported toolchains (cmake/CanopySupported.cmake), without those toolchains:
# each case runs canopy_require_supported in a cmake -P process of its own (a FATAL_ERROR ends the
# process) and checks its exit status and its one line. With -DONE=LANG;ID;VERSION it is that process.
cmake_minimum_required(VERSION 3.25)
if(DEFINED ONE)
  include(${SOURCE}/cmake/CanopySupported.cmake)
  list(GET ONE 0 language)
  list(GET ONE 1 id)
  list(GET ONE 2 version)
  canopy_require_supported(${language} ${id} ${version} /usr/bin/example-compiler)
  message(STATUS "accepted")
  return()
endif()

# language|id|version|expected exit (0 accepted, 1 refused)|what the output must say (no semicolons)
set(cases
  "CUDA|NVIDIA|11.8|1|/usr/bin/example-compiler is CUDA 11.8. Point CMAKE_CUDA_COMPILER at a newer nvcc"
  "CUDA|NVIDIA|12.0|0|accepted"
  "CUDA|NVIDIA|13.0.48|0|accepted"
  "CUDA|Clang|17.0|1|the CUDA compiler is Clang"
  "CXX|GNU|10.2|1|/usr/bin/example-compiler is GCC 10.2. Set CMAKE_CXX_COMPILER to a newer compiler"
  "CXX|GNU|11.1|0|accepted"
  "CXX|Clang|13.0.1|1|Canopy needs Clang 14 or newer"
  "CXX|Clang|14.0|0|accepted"
  "CXX|MSVC|19.38|0|built and tested with GCC and Clang only, not MSVC")
foreach(c IN LISTS cases)
  string(REPLACE "|" ";" f "${c}")
  list(GET f 0 language)
  list(GET f 1 id)
  list(GET f 2 version)
  list(GET f 3 expect)
  list(GET f 4 says)
  execute_process(COMMAND ${CMAKE_COMMAND} -DSOURCE=${SOURCE} "-DONE=${language};${id};${version}"
                          -P ${CMAKE_CURRENT_LIST_FILE}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REPLACE "\n" " " text "${out}${err}")
  string(REGEX REPLACE " +" " " text "${text}")
  if(NOT rc EQUAL expect)
    message(FATAL_ERROR "${language} ${id} ${version}: exit ${rc}, expected ${expect}:\n${out}${err}")
  endif()
  string(FIND "${text}" "${says}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${language} ${id} ${version}: the output does not say '${says}':\n${out}${err}")
  endif()
  message(STATUS "${language} ${id} ${version}: ${expect} (${says})")
endforeach()
