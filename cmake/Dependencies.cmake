# Every dependency comes from a Debian package installed by scripts/setup.sh.
find_package(Threads REQUIRED)
# Asio and Process are header-only in 1.74; Process needs Filesystem.
find_package(Boost 1.74 REQUIRED COMPONENTS filesystem)
find_package(CLI11 CONFIG REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(OpenSSL 3 REQUIRED COMPONENTS Crypto)  # HMAC-SHA256 for store authentication
find_package(spdlog REQUIRED)
find_package(Gloo REQUIRED)  # Debian libgloo-dev: CPU collectives over TCP

# CUDA and NCCL (under /usr/local/cuda on the project's machines) enable the nccl backend;
# everything else builds and passes without them.
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND)
  include(${CMAKE_CURRENT_LIST_DIR}/ddprunNCCL.cmake)  # ddprun::libnccl
endif()
if(CUDAToolkit_FOUND AND DDPRUN_NCCL_FOUND)
  set(DDPRUN_WITH_NCCL ON)
  message(STATUS "ddprun: nccl backend enabled (${DDPRUN_NCCL_LIBRARY})")
else()
  set(DDPRUN_WITH_NCCL OFF)
  message(STATUS "ddprun: CUDA/NCCL not found; building without the nccl backend")
endif()

if(DDPRUN_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
