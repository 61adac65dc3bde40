#pragma once
/// Where ddprun's Python modules are (python/ in the repository: sitecustomize.py, which lets ddprun
/// dump a Python worker's stacks, and ddprun_progress.py): `<ddprun's folder>/../share/ddprun/python`,
/// the same relative place in the build tree (build/bin/ddprun, build/share/ddprun/python, copied
/// there by CMake) and in an installed tree (PREFIX/bin/ddprun, PREFIX/share/ddprun/python).
#include <filesystem>
#include <optional>

namespace ddprun::launcher {

/// The folder for the ddprun at `executable` (symlinks resolved), when it holds sitecustomize.py;
/// nothing for a ddprun copied away from its tree (its workers then get no Python stacks).
std::optional<std::filesystem::path> python_dir_for(const std::filesystem::path& executable);

/// python_dir_for this process's own executable (/proc/self/exe).
std::optional<std::filesystem::path> find_python_dir();

}  // namespace ddprun::launcher
