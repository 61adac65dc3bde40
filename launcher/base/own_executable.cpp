#include "launcher/base/own_executable.hpp"

namespace ddprun::launcher {

std::filesystem::path own_executable_dir() {
  std::error_code error;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::filesystem::path() : self.parent_path();
}

}  // namespace ddprun::launcher
