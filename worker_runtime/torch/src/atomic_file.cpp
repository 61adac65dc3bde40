// write, fsync, rename, fsync the folder: the classic sequence for an atomic replace on POSIX.
#include "atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "ddprun/error.hpp"

namespace ddprun::torch::detail {
namespace {

/// "saving /c/checkpoint.pt: writing /c/.checkpoint.pt.tmp.42 failed: No space left on device"
[[noreturn]] void fail(const std::filesystem::path& target, const std::string& step, const std::filesystem::path& subject,
                       int error) {
  throw Error("saving " + target.string() + ": " + step + " " + subject.string() + " failed: " + std::strerror(error));
}

/// Closes on every path out, so an exception never leaks the descriptor.
struct Descriptor {
  int fd = -1;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) fail(path, "creating the folder", folder, error.value());

  // Same folder: rename(2) is atomic only within one filesystem. The pid keeps two writers apart.
  std::string temporary_name = ".";  // appended, not operator+: g++ 12 warns falsely (-Wrestrict) on that
  temporary_name.append(path.filename().string()).append(".tmp.").append(std::to_string(::getpid()));
  const std::filesystem::path temporary = folder / temporary_name;
  try {
    Descriptor file{::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (file.fd < 0) fail(path, "creating", temporary, errno);
    std::size_t written = 0;
    while (written < content.size()) {
      ssize_t n = ::write(file.fd, content.data() + written, content.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(path, "writing", temporary, errno);
      written += static_cast<std::size_t>(n);
    }
    if (::fsync(file.fd) != 0) fail(path, "fsync of", temporary, errno);
    if (::close(file.fd) != 0) {
      file.fd = -1;
      fail(path, "closing", temporary, errno);
    }
    file.fd = -1;
    if (::rename(temporary.c_str(), path.c_str()) != 0) fail(path, "renaming the temporary file to", path, errno);
  } catch (...) {
    ::unlink(temporary.c_str());
    throw;
  }
  Descriptor directory{::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (directory.fd < 0) fail(path, "opening the folder", folder, errno);
  if (::fsync(directory.fd) != 0) fail(path, "fsync of the folder", folder, errno);
}

}  // namespace ddprun::torch::detail
