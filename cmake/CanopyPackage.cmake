# `cmake --install` and the package config, so that a simulation can do
#   find_package(canopy 0.1 REQUIRED)              # canopy::runtime (and canopy::trees if Boost is there)
#   target_link_libraries(sim PRIVATE canopy::runtime)
# Two export sets: canopy::runtime needs only the CUDA toolkit's CCCL headers; canopy::trees also
# needs Boost.Graph, which a consumer of the scheduler alone should not have to install.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CANOPY_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/canopy)

install(TARGETS canopy_runtime canopy_cuda canopy_atomics EXPORT canopy-runtime-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT canopy_development)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/canopy ${PROJECT_SOURCE_DIR}/runtime/atomics/include/canopy
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT canopy_development)
install(EXPORT canopy-runtime-targets NAMESPACE canopy:: DESTINATION ${CANOPY_INSTALL_CMAKEDIR} COMPONENT canopy_development)

install(TARGETS canopy_trees EXPORT canopy-trees-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT canopy_development)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/trees/include/canopy DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT canopy_development)
install(EXPORT canopy-trees-targets NAMESPACE canopy:: DESTINATION ${CANOPY_INSTALL_CMAKEDIR} COMPONENT canopy_development)

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/canopyConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/canopyConfig.cmake
                              INSTALL_DESTINATION ${CANOPY_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/canopyConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)  # 0.x: minor versions may break the API
install(FILES ${PROJECT_BINARY_DIR}/canopyConfig.cmake ${PROJECT_BINARY_DIR}/canopyConfigVersion.cmake
        DESTINATION ${CANOPY_INSTALL_CMAKEDIR} COMPONENT canopy_development)
