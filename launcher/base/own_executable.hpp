#pragma once
/// Where this process's own executable sits: the folder ddprun finds its companions in
/// (ddprun-unwind beside it, the interpreter of the Python env it is installed in).
#include <filesystem>

namespace ddprun::launcher {

/// The folder of /proc/self/exe, symlinks resolved (the kernel's path: a link to venv/bin/ddprun
/// still gives venv/bin); empty when it cannot be read.
std::filesystem::path own_executable_dir();

}  // namespace ddprun::launcher
