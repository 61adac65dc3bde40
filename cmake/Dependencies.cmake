# Every dependency comes from a Debian package installed by scripts/setup.sh.
find_package(Threads REQUIRED)
# Asio and Process are header-only in 1.74; Process needs Filesystem.
find_package(Boost 1.74 REQUIRED COMPONENTS filesystem)
find_package(CLI11 CONFIG REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(OpenSSL 3 REQUIRED COMPONENTS Crypto)  # HMAC-SHA256 for store authentication
if(DDPRUN_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
