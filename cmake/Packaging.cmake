# Packaging: `cmake --install build --prefix P` installs the ddprun and ddprun-store binaries, the
# runtime's public headers and static libraries, and P/lib/cmake/ddprun/ddprunConfig.cmake, so that
# an existing C++ trainer adds two lines to its CMakeLists.txt:
#   find_package(ddprun REQUIRED)
#   target_link_libraries(trainer PRIVATE ddprun::runtime)
# Included from the top-level CMakeLists.txt after every add_subdirectory that defines a target.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DDPRUN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/ddprun)

foreach(binary ddprun ddprun-store)
  if(TARGET ${binary})
    install(TARGETS ${binary} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

if(TARGET ddprun_runtime)
  # ddprun_runtime is static: what it links privately still ends up on the consumer's link line, so
  # those of our targets are exported with it (their own dependencies are found again by
  # ddprunConfig.cmake). ddprun_warnings adds nothing to a link; it is exported only because it is named.
  set_target_properties(ddprun_rendezvous PROPERTIES EXPORT_NAME rendezvous)
  set_target_properties(ddprun_warnings PROPERTIES EXPORT_NAME warnings)
  # rendezvous/ puts its source directory on its include path unwrapped, which an export refuses (the
  # path would not exist on the consumer's side); consumers of the runtime never include its headers.
  get_target_property(rendezvous_includes ddprun_rendezvous INTERFACE_INCLUDE_DIRECTORIES)
  if(rendezvous_includes AND NOT rendezvous_includes MATCHES "BUILD_INTERFACE")
    set_target_properties(ddprun_rendezvous PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "$<BUILD_INTERFACE:${rendezvous_includes}>")
  endif()

  install(TARGETS ddprun_runtime ddprun_rendezvous ddprun_warnings
          EXPORT ddprunTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/worker_runtime/include/ddprun
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN "*.hpp")
  if(TARGET ddprun_torch)
    install(TARGETS ddprun_torch EXPORT ddprunTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/worker_runtime/torch/include/ddprun
            DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
  endif()
  install(EXPORT ddprunTargets NAMESPACE ddprun:: DESTINATION ${DDPRUN_INSTALL_CMAKEDIR})

  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ddprunConfig.cmake.in
                                ${PROJECT_BINARY_DIR}/ddprunConfig.cmake
                                INSTALL_DESTINATION ${DDPRUN_INSTALL_CMAKEDIR})
  # 0.x: a minor version may break the API, so only the same major.minor is compatible.
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/ddprunConfigVersion.cmake
                                   VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/ddprunConfig.cmake ${PROJECT_BINARY_DIR}/ddprunConfigVersion.cmake
          DESTINATION ${DDPRUN_INSTALL_CMAKEDIR})
endif()
