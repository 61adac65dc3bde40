# Packaging: `cmake --install build --prefix P` installs the ddprun and ddprun-store binaries, the
# runtime's public headers and static libraries, and P/lib/cmake/ddprun/ddprunConfig.cmake, so that
# an existing C++ trainer adds two lines to its CMakeLists.txt (and -DCMAKE_PREFIX_PATH=P):
#   find_package(ddprun REQUIRED)
#   target_link_libraries(trainer PRIVATE ddprun::runtime)
# ddprun::torch is the component `torch`: find_package(ddprun REQUIRED COMPONENTS torch).
# Included from the top-level CMakeLists.txt after every add_subdirectory that defines a target.
include(CMakePackageConfigHelpers)

set(DDPRUN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/ddprun)

foreach(binary ddprun ddprun-store ddprun-unwind)
  if(TARGET ${binary})
    install(TARGETS ${binary} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

if(TARGET ddprun_runtime)
  # Two export sets: ddprunTargets.cmake (ddprun::runtime) needs Threads, fmt, spdlog, Gloo, OpenSSL
  # and, with the nccl backend, CUDA's runtime and NCCL; ddprunTorchTargets.cmake (ddprun::torch) also
  # needs LibTorch, which the config looks for only when the component is asked for. The runtime's
  # archive holds the store client's and the common helpers' objects (worker_runtime/CMakeLists.txt),
  # so no internal target of the build is exported.
  install(TARGETS ddprun_runtime EXPORT ddprunTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/worker_runtime/include/ddprun
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN "*.hpp")
  install(EXPORT ddprunTargets NAMESPACE ddprun:: DESTINATION ${DDPRUN_INSTALL_CMAKEDIR})
  if(TARGET ddprun_torch)
    install(TARGETS ddprun_torch EXPORT ddprunTorchTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/worker_runtime/torch/include/ddprun
            DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
    install(EXPORT ddprunTorchTargets NAMESPACE ddprun:: DESTINATION ${DDPRUN_INSTALL_CMAKEDIR})
  endif()

  # Where this build found CUDA and NCCL, as hints for the config (search paths, not link paths).
  set(DDPRUN_NCCL_HINT_DIRS "")
  set(DDPRUN_CUDA_ROOT_HINT "")
  if(DDPRUN_WITH_NCCL)
    get_filename_component(DDPRUN_CUDA_ROOT_HINT "${CUDAToolkit_BIN_DIR}" DIRECTORY)  # .../cuda/bin -> .../cuda
    get_filename_component(nccl_library_dir "${DDPRUN_NCCL_LIBRARY}" DIRECTORY)
    set(DDPRUN_NCCL_HINT_DIRS "${nccl_library_dir};${DDPRUN_NCCL_INCLUDE_DIR}")
  endif()
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ddprunConfig.cmake.in
                                ${PROJECT_BINARY_DIR}/ddprunConfig.cmake
                                INSTALL_DESTINATION ${DDPRUN_INSTALL_CMAKEDIR})
  # 0.x: a minor version may break the API, so only the same major.minor is compatible.
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/ddprunConfigVersion.cmake
                                   VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/ddprunConfig.cmake ${PROJECT_BINARY_DIR}/ddprunConfigVersion.cmake
                ${PROJECT_SOURCE_DIR}/cmake/ddprunNCCL.cmake
          DESTINATION ${DDPRUN_INSTALL_CMAKEDIR})
endif()
