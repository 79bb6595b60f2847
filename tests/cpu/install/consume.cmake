# SPDX-License-Identifier: Apache-2.0
# cmake -DPREFIX=<installed canopy> -DKIND=cxx|cuda -DSOURCE=<consumer> -DBINARY=<dir> -DGENERATOR=<g>
#       -DCXX=<c++ compiler> -DNVCC=<nvcc> -P consume.cmake
# Configures, builds and runs the consumer project out of tree against the installed package.
# KIND cuda also enables CUDA in the consumer (its .cu example exits 77, a skip, without a device).
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/run_step.cmake)  # run()

file(REMOVE_RECURSE ${BINARY})
set(args -S ${SOURCE} -B ${BINARY} -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${PREFIX}
         -DCMAKE_CXX_COMPILER=${CXX})
if(KIND STREQUAL "cuda")
  list(APPEND args -DCUSTOM_TASKS_GPU=ON -DCMAKE_CUDA_COMPILER=${NVCC} -DCMAKE_CUDA_ARCHITECTURES=90)
endif()
run("configure ${SOURCE}" ${CMAKE_COMMAND} ${args})
run("build ${BINARY}" ${CMAKE_COMMAND} --build ${BINARY} --parallel 1)
run("custom_tasks" ${BINARY}/custom_tasks)
message(STATUS "custom_tasks: ${output}")

# canopy::trees, canopy::passes and canopy::dags come with the package and need no Boost: with
# Boost made unfindable they are there and canopy::dags_boost is not. Asked for, canopy::dags_boost
# is there too (configure only: no build).
file(WRITE ${BINARY}/trees_consumer/CMakeLists.txt
     "cmake_minimum_required(VERSION 3.25)\nproject(trees_consumer LANGUAGES CXX)\n"
     "find_package(canopy 0.12 REQUIRED COMPONENTS runtime trees passes dags \${EXTRA})\n"
     "foreach(t trees passes dags \${EXTRA})\n  if(NOT TARGET canopy::\${t})\n    message(FATAL_ERROR \"no canopy::\${t}\")\n  endif()\nendforeach()\n"
     "if(NOT EXTRA AND TARGET canopy::dags_boost)\n  message(FATAL_ERROR \"canopy::dags_boost without asking\")\nendif()\n")
run("find_package(canopy COMPONENTS trees passes dags) without Boost" ${CMAKE_COMMAND} -S ${BINARY}/trees_consumer
    -B ${BINARY}/trees_consumer/build_no_boost -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_CXX_COMPILER=${CXX}
    -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON)
run("find_package(canopy COMPONENTS trees passes dags dags_boost)" ${CMAKE_COMMAND} -S ${BINARY}/trees_consumer
    -B ${BINARY}/trees_consumer/build -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_CXX_COMPILER=${CXX}
    -DEXTRA=dags_boost)

if(KIND STREQUAL "cuda")
  execute_process(COMMAND ${BINARY}/custom_tasks_gpu RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "custom_tasks_gpu (${rc}): ${out}${err}")
  if(rc EQUAL 77)
    message(STATUS "built against the package with CUDA; no device to run on")
    # The build is what this test checks; running it is the gpu-labelled example's job.
  elseif(NOT rc EQUAL 0)
    message(FATAL_ERROR "custom_tasks_gpu failed (${rc})")
  endif()
endif()
