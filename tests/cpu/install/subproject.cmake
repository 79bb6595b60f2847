# SPDX-License-Identifier: Apache-2.0
# cmake -DSOURCE=<canopy sources> -DBINARY=<dir> -DGENERATOR=<g> -DCXX=<c++ compiler> -P subproject.cmake
# Canopy as a sub-project (add_subdirectory, then the README's FetchContent block): a C++-only parent
# that cannot find GoogleTest, Boost, CLI11, spdlog, fmt or nlohmann-json configures, gets the
# libraries and none of Canopy's tests, tool, benchmark or examples, keeps its own flags, build type
# and C++ standard, and builds and runs a program linked with canopy::runtime.
cmake_minimum_required(VERSION 3.25)  # policies of today in script mode
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/run_step.cmake)  # run()

file(REMOVE_RECURSE ${BINARY})
# What a C++-only parent cannot find (Canopy's libraries must not look for it).
set(no_packages "")
foreach(p IN ITEMS GTest Boost CLI11 spdlog fmt nlohmann_json)
  list(APPEND no_packages -DCMAKE_DISABLE_FIND_PACKAGE_${p}=ON)
endforeach()
file(MAKE_DIRECTORY ${BINARY}/parent)
file(WRITE ${BINARY}/parent/CMakeLists.txt [=[
cmake_minimum_required(VERSION 3.25)
project(parent LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)  # the parent's own default; Canopy's targets ask for C++20 themselves
add_subdirectory(${CANOPY_SOURCE} canopy)

foreach(t IN ITEMS canopy::runtime canopy::cuda canopy::atomics canopy::trees canopy::passes canopy::dags)
  if(NOT TARGET ${t})
    message(FATAL_ERROR "as a sub-project, Canopy defines no ${t}")
  endif()
endforeach()
# Canopy's tool, a test of each folder, the benchmark, the examples, Boost's library, the docs.
foreach(t IN ITEMS canopy canopy_tool_test runtime_task_graph_test runtime_cpu_scheduler_test dag_io_test
                   canopy_atomics_host_test bench_octree_test canopy_bench_octree canopy_bench_common
                   custom_tasks nbody canopy_dags_boost canopy_docs)
  if(TARGET ${t})
    message(FATAL_ERROR "as a sub-project, Canopy defines its target ${t}")
  endif()
endforeach()
get_directory_property(options COMPILE_OPTIONS)
get_directory_property(definitions COMPILE_DEFINITIONS)
if(options OR definitions OR NOT CMAKE_CXX_FLAGS STREQUAL "${PARENT_FLAGS}")
  message(FATAL_ERROR "Canopy changed the parent's flags: options '${options}' definitions '${definitions}' "
                      "CMAKE_CXX_FLAGS '${CMAKE_CXX_FLAGS}'")
endif()
if(NOT CMAKE_CXX_STANDARD EQUAL 17 OR NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
  message(FATAL_ERROR "Canopy changed the parent's C++ standard or build type")
endif()
get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
if(CUDA IN_LIST languages OR CANOPY_GPU)
  message(FATAL_ERROR "a C++-only parent got CUDA enabled by Canopy")
endif()
if(CANOPY_BUILD_TESTS OR CANOPY_BUILD_TOOLS OR CANOPY_BUILD_BENCH OR CANOPY_BUILD_EXAMPLES)
  message(FATAL_ERROR "as a sub-project, Canopy's tests/tools/bench/examples options default to ON")
endif()

add_executable(parent_app main.cpp)
target_link_libraries(parent_app PRIVATE canopy::runtime)
]=])
configure_file(${SOURCE}/examples/custom_tasks/custom_tasks.cpp ${BINARY}/parent/main.cpp COPYONLY)
set(args -S ${BINARY}/parent -B ${BINARY}/build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=${CXX}
         -DCANOPY_SOURCE=${SOURCE} "-DCMAKE_CXX_FLAGS=-DPARENT_FLAG=1" "-DPARENT_FLAGS=-DPARENT_FLAG=1")
list(APPEND args ${no_packages})
run("configure a parent project that adds Canopy with add_subdirectory" ${CMAKE_COMMAND} ${args})
run("build the parent's program" ${CMAKE_COMMAND} --build ${BINARY}/build --target parent_app --parallel 1)
run("run the parent's program" ${BINARY}/build/parent_app)
message(STATUS "parent_app (Canopy as a sub-project): ${output}")

# The README's FetchContent block, verbatim (the ```cmake block that declares canopy), after
# add_executable(my_simulation main.cpp), with Canopy in the parent's extern/canopy (a link).
file(STRINGS ${SOURCE}/README.md lines)
set(block "")
set(in_block FALSE)
set(found FALSE)
foreach(line IN LISTS lines)
  if(NOT in_block AND line STREQUAL "```cmake")
    set(in_block TRUE)
    set(block "")
  elseif(in_block AND line STREQUAL "```")
    set(in_block FALSE)
    if(block MATCHES "FetchContent_Declare\\(canopy")
      set(found TRUE)
      break()
    endif()
  elseif(in_block)
    string(APPEND block "${line}\n")
  endif()
endforeach()
if(NOT found)
  message(FATAL_ERROR "README.md: no ```cmake block with FetchContent_Declare(canopy")
endif()
set(fc ${BINARY}/fetchcontent_parent)
file(MAKE_DIRECTORY ${fc}/extern)
file(CREATE_LINK ${SOURCE} ${fc}/extern/canopy SYMBOLIC)
file(WRITE ${fc}/CMakeLists.txt "cmake_minimum_required(VERSION 3.25)\nproject(fetchcontent_parent LANGUAGES CXX)\n"
                               "add_executable(my_simulation main.cpp)\n${block}")
configure_file(${SOURCE}/examples/custom_tasks/custom_tasks.cpp ${fc}/main.cpp COPYONLY)
set(args -S ${fc} -B ${fc}/build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX})
list(APPEND args ${no_packages})
run("configure a parent made of the README's FetchContent block" ${CMAKE_COMMAND} ${args})
run("build it" ${CMAKE_COMMAND} --build ${fc}/build --target my_simulation --parallel 1)
run("run it" ${fc}/build/my_simulation)
message(STATUS "my_simulation (the README's FetchContent block): ${output}")
