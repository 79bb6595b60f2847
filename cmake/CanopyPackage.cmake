# SPDX-License-Identifier: Apache-2.0
# `cmake --install` and the package config, so that a simulation can do
#   find_package(canopy 0.12 REQUIRED)           # canopy::runtime, canopy::cuda, canopy::atomics,
#                                                # and canopy::trees, ::passes, ::dags if installed
#   target_link_libraries(sim PRIVATE canopy::runtime)
# Export sets, one file each, loaded by the config only as far as they are installed and wanted:
#   runtime     canopy::runtime, canopy::atomics: need only CCCL's headers (the CUDA toolkit's or
#               NVIDIA/cccl's); canopy::cuda (cudart) where the toolkit was found; all that
#               CANOPY_RUNTIME_ONLY installs
#   trees       canopy::trees, canopy::passes, canopy::dags: nothing more
#   dags_boost  canopy::dags_boost: Boost.Graph, looked for only when this component is asked for
#   distributed canopy::distributed: MPI (and NCCL where built with it), loaded by a package of its
#               own, canopy_distributed (below)
# Everything here is in the canopy_development component; the tool and its plot script are in
# canopy_tool (a plain `cmake --install` installs both).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CANOPY_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/canopy)

set(canopy_runtime_targets canopy_runtime canopy_atomics)
if(TARGET canopy_cuda)  # not in a runtime-only build without the CUDA toolkit
  list(APPEND canopy_runtime_targets canopy_cuda)
endif()
install(TARGETS ${canopy_runtime_targets} EXPORT canopy-runtime-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT canopy_development)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/canopy ${PROJECT_SOURCE_DIR}/runtime/atomics/include/canopy
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT canopy_development)
install(EXPORT canopy-runtime-targets NAMESPACE canopy:: DESTINATION ${CANOPY_INSTALL_CMAKEDIR} COMPONENT canopy_development)

if(TARGET canopy_trees)
  install(TARGETS canopy_trees canopy_passes canopy_dags EXPORT canopy-trees-targets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT canopy_development)
  # dags/include also holds the Boost headers of canopy::dags_boost: headers only, harmless.
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/trees/octree/include/canopy ${PROJECT_SOURCE_DIR}/trees/passes/include/canopy
                    ${PROJECT_SOURCE_DIR}/trees/dags/include/canopy
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT canopy_development)
  install(EXPORT canopy-trees-targets NAMESPACE canopy:: DESTINATION ${CANOPY_INSTALL_CMAKEDIR} COMPONENT canopy_development)
endif()

if(TARGET canopy_dags_boost)
  install(TARGETS canopy_dags_boost EXPORT canopy-dags-boost-targets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT canopy_development)
  install(EXPORT canopy-dags-boost-targets NAMESPACE canopy:: DESTINATION ${CANOPY_INSTALL_CMAKEDIR}
          COMPONENT canopy_development)
endif()

# canopy::distributed (distributed/), where it was built by default (MPI found, and the tests or
# the benchmarks on: else it is EXCLUDE_FROM_ALL and there is nothing to install). A package of its
# own, so that the canopy package's users never need MPI:
#   find_package(canopy_distributed REQUIRED)    # finds canopy (same prefix) and MPI
#   target_link_libraries(sim PRIVATE canopy::distributed)
# Built with NCCL, it links the libnccl.so it was built against (an absolute path).
if(TARGET canopy_distributed)
  get_target_property(canopy_distributed_excluded canopy_distributed EXCLUDE_FROM_ALL)
  if(NOT canopy_distributed_excluded)
    install(TARGETS canopy_distributed EXPORT canopy-distributed-targets
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT canopy_development)
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/distributed/include/canopy
            DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT canopy_development)
    install(EXPORT canopy-distributed-targets NAMESPACE canopy:: DESTINATION ${CANOPY_INSTALL_CMAKEDIR}
            COMPONENT canopy_development)
    set(canopy_distributed_config ${PROJECT_BINARY_DIR}/canopy_distributedConfig.cmake)
    file(CONFIGURE OUTPUT ${canopy_distributed_config} @ONLY CONTENT [=[
# SPDX-License-Identifier: Apache-2.0
# canopy::distributed: the octree and its upward pass across MPI ranks (written by CanopyPackage.cmake).
include(CMakeFindDependencyMacro)
find_dependency(canopy @PROJECT_VERSION@ EXACT CONFIG HINTS "${CMAKE_CURRENT_LIST_DIR}/../canopy")
set(MPI_CXX_SKIP_MPICXX ON)
find_dependency(MPI COMPONENTS CXX)
include("${CMAKE_CURRENT_LIST_DIR}/../canopy/canopy-distributed-targets.cmake")
]=])
    write_basic_package_version_file(${PROJECT_BINARY_DIR}/canopy_distributedConfigVersion.cmake
                                     COMPATIBILITY SameMinorVersion)
    install(FILES ${canopy_distributed_config} ${PROJECT_BINARY_DIR}/canopy_distributedConfigVersion.cmake
            DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/canopy_distributed COMPONENT canopy_development)
  endif()
endif()

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/canopyConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/canopyConfig.cmake
                              INSTALL_DESTINATION ${CANOPY_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/canopyConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)  # 0.x: minor versions may break the API
install(FILES ${PROJECT_BINARY_DIR}/canopyConfig.cmake ${PROJECT_BINARY_DIR}/canopyConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/CanopyCudaDialect.cmake
        DESTINATION ${CANOPY_INSTALL_CMAKEDIR} COMPONENT canopy_development)

# canopy.pc for builds without CMake (pkg-config --cflags --libs canopy): the scheduler's host
# side, canopy::runtime, with the CCCL headers of the toolkit it was built against.
# CCCL::libcudacxx is an alias of an interface target that holds the include directory.
set(canopy_pc_cflags "")
set(canopy_pc_targets CCCL::libcudacxx)
foreach(depth RANGE 3)
  set(next "")
  foreach(t IN LISTS canopy_pc_targets)
    if(TARGET ${t})
      get_target_property(dirs ${t} INTERFACE_INCLUDE_DIRECTORIES)
      foreach(dir IN LISTS dirs)
        if(dir AND NOT dir MATCHES "\\$<" AND NOT canopy_pc_cflags MATCHES " -I${dir}( |$)")
          string(APPEND canopy_pc_cflags " -I${dir}")
        endif()
      endforeach()
      get_target_property(links ${t} INTERFACE_LINK_LIBRARIES)
      if(links)
        list(APPEND next ${links})
      endif()
    endif()
  endforeach()
  set(canopy_pc_targets ${next})
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/canopy.pc.in ${PROJECT_BINARY_DIR}/canopy.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/canopy.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT canopy_development)
