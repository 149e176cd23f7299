# `cmake --install` + `find_package(distcrown)`: exported targets and a config that finds the
# public dependency (LibTorch) again in the consumer.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS distcrown distcrown_mpi EXPORT distcrownTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS distcrown_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The public API: these headers only (scripts/check_layers.py checks that they include nothing
# else). Operators, the ONNX structs, the optimiser and the branch-and-bound internals stay inside.
set(DISTCROWN_PUBLIC_HEADERS
  include/distcrown/distcrown.hpp
  include/distcrown/util/deadline.hpp
  include/distcrown/util/enum_names.hpp
  include/distcrown/util/error.hpp
  include/distcrown/util/memory.hpp
  include/distcrown/util/output_file.hpp
  include/distcrown/collective/communicator.hpp
  include/distcrown/collective/agreement.hpp
  include/distcrown/collective/autograd.hpp
  include/distcrown/collective/mpi.hpp
  include/distcrown/bounds/interval.hpp
  include/distcrown/bounds/patches.hpp
  include/distcrown/graph/param.hpp
  include/distcrown/graph/bound_node.hpp
  include/distcrown/graph/bound_graph.hpp
  include/distcrown/methods/options.hpp
  include/distcrown/methods/pass_context.hpp
  include/distcrown/methods/relaxation_hook.hpp
  include/distcrown/methods/ibp.hpp
  include/distcrown/methods/crown.hpp
  include/distcrown/methods/alpha_crown.hpp
  include/distcrown/methods/compute_bounds.hpp
  include/distcrown/sharding/sharded_param.hpp
  include/distcrown/sharding/partitioner.hpp
  include/distcrown/io/vnnlib.hpp
  include/distcrown/io/onnx_loader.hpp
  include/distcrown/io/problem.hpp
  include/distcrown/io/point_model.hpp
  include/distcrown/bab/objective.hpp
  include/distcrown/bab/attack.hpp
  include/distcrown/bab/bab.hpp
  include/distcrown/bab/verifier.hpp
  include/distcrown/bab/enumeration.hpp
)
foreach(header ${DISTCROWN_PUBLIC_HEADERS})
  get_filename_component(dir "${header}" DIRECTORY)
  string(REGEX REPLACE "^include/?" "" dir "${dir}")
  install(FILES "${PROJECT_SOURCE_DIR}/${header}" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/${dir}")
endforeach()
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
