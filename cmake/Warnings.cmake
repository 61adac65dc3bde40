# ddprun_warnings: the warning set every target of the project compiles with.
add_library(ddprun_warnings INTERFACE)
target_compile_options(ddprun_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor)
