#include "launcher/base/python_dir.hpp"

namespace ddprun::launcher {

std::optional<std::filesystem::path> python_dir_for(const std::filesystem::path& executable) {
  std::error_code error;
  std::filesystem::path real = std::filesystem::canonical(executable, error);
  if (error) return std::nullopt;
  std::filesystem::path dir = real.parent_path().parent_path() / "share" / "ddprun" / "python";
  if (!std::filesystem::is_regular_file(dir / "sitecustomize.py", error)) return std::nullopt;
  return dir.lexically_normal();
}

std::optional<std::filesystem::path> find_python_dir() { return python_dir_for("/proc/self/exe"); }

}  // namespace ddprun::launcher
