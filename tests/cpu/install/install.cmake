# SPDX-License-Identifier: Apache-2.0
# cmake -DBUILD=<canopy build dir> -DPREFIX=<fresh prefix> -P install.cmake
# Installs the development component (libraries, headers, package config) and checks the layout.
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX} --component canopy_development
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD} failed (${rc})")
endif()
include(GNUInstallDirs)
foreach(f IN ITEMS ${CMAKE_INSTALL_INCLUDEDIR}/canopy/cpu_scheduler.hpp ${CMAKE_INSTALL_INCLUDEDIR}/canopy/gpu_scheduler.cuh
               ${CMAKE_INSTALL_INCLUDEDIR}/canopy/detail/scheduler_state.hpp ${CMAKE_INSTALL_INCLUDEDIR}/canopy/dags/dag_io.hpp
               ${CMAKE_INSTALL_INCLUDEDIR}/canopy/trees/octree.hpp ${CMAKE_INSTALL_INCLUDEDIR}/canopy/passes/upward_runner.hpp
               ${CMAKE_INSTALL_LIBDIR}/libcanopy_runtime.a ${CMAKE_INSTALL_LIBDIR}/libcanopy_trees.a
               ${CMAKE_INSTALL_LIBDIR}/libcanopy_passes.a ${CMAKE_INSTALL_LIBDIR}/libcanopy_dags.a
               ${CMAKE_INSTALL_LIBDIR}/libcanopy_dags_boost.a ${CMAKE_INSTALL_INCLUDEDIR}/canopy/version.hpp
               ${CMAKE_INSTALL_LIBDIR}/pkgconfig/canopy.pc
               ${CMAKE_INSTALL_LIBDIR}/cmake/canopy/canopyConfig.cmake ${CMAKE_INSTALL_LIBDIR}/cmake/canopy/canopyConfigVersion.cmake)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "not installed: ${PREFIX}/${f}")
  endif()
endforeach()
message(STATUS "installed into ${PREFIX}")
