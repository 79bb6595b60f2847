# SPDX-License-Identifier: Apache-2.0
# cmake -DBUILD=<canopy build dir> -DPREFIX=<fresh prefix> -P tool_plot.cmake
# The installed tool finds its installed plot script: installs the canopy_tool component (the tool,
# share/canopy/plot_bench.py), hides the build and source trees' copies from it (CANOPY_PLOT_SCRIPT
# unset, run from an empty directory), runs a tiny `canopy bench --plot` on the CPU and checks that
# it ran <prefix>/share/canopy/plot_bench.py; the plot itself is checked when matplotlib is there.
cmake_minimum_required(VERSION 3.25)  # policies of today in script mode
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX} --component canopy_tool RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD} --component canopy_tool failed (${rc})")
endif()
include(GNUInstallDirs)
set(tool ${PREFIX}/${CMAKE_INSTALL_BINDIR}/canopy)
set(script ${PREFIX}/${CMAKE_INSTALL_DATADIR}/canopy/plot_bench.py)
foreach(f IN ITEMS ${tool} ${script})
  if(NOT EXISTS ${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
execute_process(COMMAND ${tool} --version RESULT_VARIABLE rc OUTPUT_VARIABLE version)
if(NOT rc EQUAL 0 OR NOT version MATCHES "^canopy [0-9]+\\.[0-9]+\\.[0-9]+ \\(git ")
  message(FATAL_ERROR "canopy --version (${rc}): '${version}'")
endif()

set(work ${PREFIX}/work)
file(MAKE_DIRECTORY ${work})
unset(ENV{CANOPY_PLOT_SCRIPT})
execute_process(COMMAND ${tool} bench --backend cpu --depths 1 --reps 1 --modes continuation,reference
                        --plot ${work}/p --log-level debug
                WORKING_DIRECTORY ${work} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "canopy bench --plot failed (${rc}):\n${out}\n${err}")
endif()
file(REAL_PATH ${script} real_script)
if(NOT err MATCHES "--plot: running [^\n]* ${real_script}\n")
  message(FATAL_ERROR "the installed tool did not run the installed ${real_script}:\n${err}")
endif()
execute_process(COMMAND /usr/bin/python3 -c "import matplotlib" RESULT_VARIABLE no_matplotlib OUTPUT_QUIET ERROR_QUIET)
if(no_matplotlib EQUAL 0 AND NOT EXISTS ${work}/p.png)
  message(FATAL_ERROR "canopy bench --plot wrote no ${work}/p.png:\n${err}")
endif()
message(STATUS "${tool} plotted with ${real_script}")
