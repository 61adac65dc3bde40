# Every dependency comes from a Debian package installed by scripts/setup.sh.
#
# DDPRUN_PORTABLE (scripts/package.sh): only the binaries the wheel ships (ddprun, ddprun-store,
# ddprun-unwind), each needing glibc alone, so that they run on any Linux with glibc >= the one
# built on: Boost, OpenSSL, libunwind (and its liblzma) from their static archives, fmt header-only
# (Debian ships no libfmt.a), libstdc++ and libgcc static. No runtime, examples, tests or benches.
if(DDPRUN_PORTABLE)
  set(Boost_USE_STATIC_LIBS ON)
  set(OPENSSL_USE_STATIC_LIBS TRUE)
  add_link_options(-static-libstdc++ -static-libgcc)
endif()
find_package(Threads REQUIRED)
# Asio and Process are header-only in 1.74; Process needs Filesystem.
find_package(Boost 1.74 REQUIRED COMPONENTS filesystem)
find_package(CLI11 CONFIG REQUIRED)
find_package(fmt REQUIRED)
# The fmt the launcher and the store link: its shared library, or in a portable build its headers.
if(DDPRUN_PORTABLE)
  set(DDPRUN_FMT fmt::fmt-header-only)
else()
  set(DDPRUN_FMT fmt::fmt)
endif()
find_package(nlohmann_json 3 REQUIRED)
find_package(OpenSSL 3 REQUIRED COMPONENTS Crypto)  # HMAC-SHA256 for store authentication
if(DDPRUN_PORTABLE)
  return()  # what follows is for the runtime, its examples and the tests
endif()
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
