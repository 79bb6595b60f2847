# `cmake --install` and the package config, so that a simulation can do
#   find_package(canopy 0.1 REQUIRED)              # canopy::runtime, canopy::trees, canopy::passes
#   target_link_libraries(sim PRIVATE canopy::runtime)
# Three export sets: canopy::runtime (and canopy::cuda) need only the CUDA toolkit; canopy::trees
# and canopy::passes (the octree and its upward pass) nothing more; canopy::dags also needs
# Boost.Graph, which a consumer of the scheduler or the octree should not have to install.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CANOPY_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/canopy)

install(TARGETS canopy_runtime canopy_cuda canopy_atomics EXPORT canopy-runtime-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT canopy_development)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/canopy ${PROJECT_SOURCE_DIR}/runtime/atomics/include/canopy
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT canopy_development)
install(EXPORT canopy-runtime-targets NAMESPACE canopy:: DESTINATION ${CANOPY_INSTALL_CMAKEDIR} COMPONENT canopy_development)

install(TARGETS canopy_trees canopy_passes EXPORT canopy-trees-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT canopy_development)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/trees/octree/include/canopy ${PROJECT_SOURCE_DIR}/trees/passes/include/canopy
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT canopy_development)
install(EXPORT canopy-trees-targets NAMESPACE canopy:: DESTINATION ${CANOPY_INSTALL_CMAKEDIR} COMPONENT canopy_development)

install(TARGETS canopy_dags EXPORT canopy-dags-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT canopy_development)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/trees/dags/include/canopy DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT canopy_development)
install(EXPORT canopy-dags-targets NAMESPACE canopy:: DESTINATION ${CANOPY_INSTALL_CMAKEDIR} COMPONENT canopy_development)

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/canopyConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/canopyConfig.cmake
                              INSTALL_DESTINATION ${CANOPY_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/canopyConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)  # 0.x: minor versions may break the API
install(FILES ${PROJECT_BINARY_DIR}/canopyConfig.cmake ${PROJECT_BINARY_DIR}/canopyConfigVersion.cmake
        DESTINATION ${CANOPY_INSTALL_CMAKEDIR} COMPONENT canopy_development)
