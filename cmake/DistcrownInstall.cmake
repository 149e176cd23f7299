# `cmake --install` + `find_package(distcrown)`: exported targets and a config that finds the
# public dependency (LibTorch) again in the consumer.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS distcrown EXPORT distcrownTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS distcrown_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/distcrown DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT distcrownTargets NAMESPACE distcrown::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/distcrown)
configure_package_config_file(cmake/distcrownConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/distcrownConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/distcrown)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/distcrownConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/distcrownConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/distcrownConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/distcrown)
