#include "idx_reader.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace fashion {

namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw std::runtime_error(path.string() + ": " + what);
}

struct GzCloser {
  void operator()(gzFile file) const { gzclose(file); }
};
using GzFile = std::unique_ptr<std::remove_pointer_t<gzFile>, GzCloser>;

/// Reads exactly `size` bytes; fails naming the file when the stream ends early or is corrupt.
void read_exactly(gzFile file, const std::filesystem::path& path, void* into, std::size_t size, const char* what) {
  auto* out = static_cast<unsigned char*>(into);
  while (size > 0) {
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(size, 1u << 30));
    const int got = gzread(file, out, chunk);
    if (got < 0) {
      int code = 0;
      std::string message = gzerror(file, &code);
      // zlib prefixes its message with the path, which fail() adds too.
      if (const std::string prefix = path.string() + ": "; message.starts_with(prefix)) message.erase(0, prefix.size());
      if (code == Z_ERRNO) message = std::strerror(errno);
      fail(path, "cannot decompress it: " + message + " (a corrupt file?)");
    }
    if (got == 0) fail(path, std::string("the file ends in the middle of the ") + what + " (truncated?)");
    out += got;
    size -= static_cast<std::size_t>(got);
  }
}

}  // namespace

IdxArray read_idx_gz(const std::filesystem::path& path, std::int64_t limit) {
  errno = 0;
  GzFile file(gzopen(path.c_str(), "rb"));
  if (!file) {
    fail(path, std::string("cannot open: ") + (errno != 0 ? std::strerror(errno) : "out of memory") +
                   (errno == ENOENT ? " (install Debian's dataset-fashion-mnist, or pass --data-dir)" : ""));
  }
  gzbuffer(file.get(), 1 << 17);

  unsigned char magic[4];
  read_exactly(file.get(), path, magic, sizeof magic, "IDX header");
  if (magic[0] != 0 || magic[1] != 0) fail(path, "not an IDX file (its first two bytes are not zero)");
  if (magic[2] != 0x08) {
    char code[8];
    std::snprintf(code, sizeof code, "0x%02x", magic[2]);
    fail(path, std::string("IDX element type ") + code + " is not supported (only 0x08, unsigned bytes)");
  }
  const int rank = magic[3];
  if (rank < 1) fail(path, "an IDX file with no dimensions");

  IdxArray array;
  std::uint64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    unsigned char be[4];
    read_exactly(file.get(), path, be, sizeof be, "IDX header");
    const std::uint64_t size = (std::uint64_t{be[0]} << 24) | (std::uint64_t{be[1]} << 16) |
                               (std::uint64_t{be[2]} << 8) | std::uint64_t{be[3]};
    array.shape.push_back(static_cast<std::int64_t>(size));
    if (size != 0 && count > (std::uint64_t{1} << 40) / size) fail(path, "an IDX header with implausible dimensions");
    count *= size;
  }
  if (limit >= 0 && limit < array.shape[0]) {
    const auto items = static_cast<std::uint64_t>(array.shape[0]);  // > limit >= 0
    count = count / items * static_cast<std::uint64_t>(limit);
    array.shape[0] = limit;
  }
  array.data.resize(count);
  read_exactly(file.get(), path, array.data.data(), array.data.size(), "data");
  return array;
}

}  // namespace fashion
