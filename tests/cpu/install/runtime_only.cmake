# SPDX-License-Identifier: Apache-2.0
# cmake -DSOURCE=<canopy sources> -DBINARY=<dir> -DPREFIX=<fresh prefix> -DREADME=<README.md>
#       -DGENERATOR=<g> -DCXX=<c++ compiler> -P runtime_only.cmake
# The runtime-only install and the README's consumer:
#  1. configures Canopy with CANOPY_RUNTIME_ONLY=ON while GoogleTest, Boost, CLI11, spdlog, fmt and
#     nlohmann-json are made unfindable (CMAKE_DISABLE_FIND_PACKAGE_*): configuring must not look
#     for them, nor enable CUDA; builds and installs it, and checks that only the runtime came;
#  2. configures, builds and runs a project made of exactly the README's CMake snippet (the first
#     ```cmake block after "## Using Canopy in your own code") and the README's example program
#     (examples/custom_tasks/custom_tasks.cpp as main.cpp) against that install.
cmake_minimum_required(VERSION 3.25)  # policies of today in script mode
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/run_step.cmake)  # run()

file(REMOVE_RECURSE ${BINARY} ${PREFIX})
set(not_needed GTest Boost CLI11 spdlog fmt nlohmann_json)
set(args -S ${SOURCE} -B ${BINARY}/canopy -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX}
         -DCANOPY_RUNTIME_ONLY=ON)
foreach(p IN LISTS not_needed)
  list(APPEND args -DCMAKE_DISABLE_FIND_PACKAGE_${p}=ON)
endforeach()
run("configure Canopy with CANOPY_RUNTIME_ONLY=ON and no ${not_needed}" ${CMAKE_COMMAND} ${args})
file(GLOB cuda_compiler_files ${BINARY}/canopy/CMakeFiles/*/CMakeCUDACompiler.cmake)
if(cuda_compiler_files)
  message(FATAL_ERROR "a runtime-only configure enabled CUDA: ${cuda_compiler_files}")
endif()
run("build the runtime" ${CMAKE_COMMAND} --build ${BINARY}/canopy --parallel 1)
run("install the runtime" ${CMAKE_COMMAND} --install ${BINARY}/canopy --prefix ${PREFIX})
include(GNUInstallDirs)
foreach(f IN ITEMS ${CMAKE_INSTALL_INCLUDEDIR}/canopy/cpu_scheduler.hpp ${CMAKE_INSTALL_INCLUDEDIR}/canopy/version.hpp
               ${CMAKE_INSTALL_LIBDIR}/libcanopy_runtime.a ${CMAKE_INSTALL_LIBDIR}/cmake/canopy/canopyConfig.cmake
               ${CMAKE_INSTALL_LIBDIR}/cmake/canopy/canopy-runtime-targets.cmake ${CMAKE_INSTALL_LIBDIR}/pkgconfig/canopy.pc)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "runtime-only install: not installed: ${PREFIX}/${f}")
  endif()
endforeach()
foreach(f IN ITEMS ${CMAKE_INSTALL_LIBDIR}/libcanopy_trees.a ${CMAKE_INSTALL_LIBDIR}/cmake/canopy/canopy-trees-targets.cmake
               ${CMAKE_INSTALL_BINDIR}/canopy ${CMAKE_INSTALL_INCLUDEDIR}/canopy/trees/octree.hpp)
  if(EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "runtime-only install: installed anyway: ${PREFIX}/${f}")
  endif()
endforeach()

# The README's snippet, verbatim.
file(STRINGS ${README} lines)
set(state before)
set(snippet "")
foreach(line IN LISTS lines)
  if(state STREQUAL "before" AND line STREQUAL "## Using Canopy in your own code")
    set(state section)
  elseif(state STREQUAL "section" AND line STREQUAL "```cmake")
    set(state snippet)
  elseif(state STREQUAL "snippet")
    if(line STREQUAL "```")
      set(state done)
      break()
    endif()
    string(APPEND snippet "${line}\n")
  endif()
endforeach()
if(NOT state STREQUAL "done")
  message(FATAL_ERROR "${README}: no ```cmake block after '## Using Canopy in your own code'")
endif()
set(consumer ${BINARY}/readme_consumer)
file(WRITE ${consumer}/CMakeLists.txt "${snippet}")
configure_file(${SOURCE}/examples/custom_tasks/custom_tasks.cpp ${consumer}/main.cpp COPYONLY)
set(args -S ${consumer} -B ${consumer}/build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX}
         -DCMAKE_PREFIX_PATH=${PREFIX})
foreach(p IN LISTS not_needed)
  list(APPEND args -DCMAKE_DISABLE_FIND_PACKAGE_${p}=ON)
endforeach()
run("configure the README's consumer" ${CMAKE_COMMAND} ${args})
run("build the README's consumer" ${CMAKE_COMMAND} --build ${consumer}/build --parallel 1)
string(REGEX MATCH "add_executable\\(([A-Za-z0-9_.-]+)" _ "${snippet}")
set(program_name ${CMAKE_MATCH_1})
set(program ${consumer}/build/${program_name})
if(NOT CMAKE_MATCH_1 OR NOT EXISTS ${program})
  message(FATAL_ERROR "the README's consumer built no program '${CMAKE_MATCH_1}' in ${consumer}/build")
endif()
run("run ${program}" ${program})
message(STATUS "README consumer against the runtime-only install: ${output}")

# canopy.pc: the same program built by the compiler alone, with what pkg-config says.
find_program(PKG_CONFIG NAMES pkg-config pkgconf)
if(PKG_CONFIG)
  set(ENV{PKG_CONFIG_PATH} ${PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  run("pkg-config --cflags --libs canopy" ${PKG_CONFIG} --cflags --libs canopy)
  string(STRIP "${output}" flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run("build main.cpp with pkg-config's flags" ${CXX} ${consumer}/main.cpp ${flags} -o ${consumer}/pc_program)
  run("run the pkg-config build" ${consumer}/pc_program)
  message(STATUS "pkg-config build: ${output}")
endif()

# 3. Without the CUDA toolkit: CCCL's package alone (CCCL_DIR; here the toolkit's own CCCL, with
#    the toolkit itself made unfindable), for both the runtime-only build and the README's consumer.
#    canopy::cuda (cudart) is then neither built nor installed; the consumer needs nothing else.
if(CCCL_DIR)
  set(nocuda ${BINARY}/no_toolkit)
  set(args -S ${SOURCE} -B ${nocuda}/canopy -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX}
           -DCANOPY_RUNTIME_ONLY=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DCCCL_DIR=${CCCL_DIR})
  foreach(p IN LISTS not_needed)
    list(APPEND args -DCMAKE_DISABLE_FIND_PACKAGE_${p}=ON)
  endforeach()
  run("configure a runtime-only Canopy without the CUDA toolkit (CCCL_DIR only)" ${CMAKE_COMMAND} ${args})
  run("build it" ${CMAKE_COMMAND} --build ${nocuda}/canopy --parallel 1)
  run("install it" ${CMAKE_COMMAND} --install ${nocuda}/canopy --prefix ${nocuda}/prefix)
  file(READ ${nocuda}/prefix/${CMAKE_INSTALL_LIBDIR}/cmake/canopy/canopy-runtime-targets.cmake targets)
  if(targets MATCHES "canopy::cuda" OR NOT targets MATCHES "canopy::runtime")
    message(FATAL_ERROR "without the toolkit the install should export canopy::runtime and no canopy::cuda")
  endif()
  set(args -S ${consumer} -B ${nocuda}/consumer -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX}
           -DCMAKE_PREFIX_PATH=${nocuda}/prefix -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON -DCCCL_DIR=${CCCL_DIR})
  run("configure the README's consumer without the CUDA toolkit" ${CMAKE_COMMAND} ${args})
  run("build it" ${CMAKE_COMMAND} --build ${nocuda}/consumer --parallel 1)
  run("run it" ${nocuda}/consumer/${program_name})
  message(STATUS "README consumer with CCCL's headers and no CUDA toolkit: ${output}")
else()
  message(FATAL_ERROR "CCCL_DIR not passed: the test without the CUDA toolkit cannot run")
endif()
