#pragma once
/// Reading IDX files, the format of MNIST and Fashion-MNIST, gzipped as Debian's dataset packages
/// ship them (/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz, ...).
///
/// The format: a 4-byte magic (0x00, 0x00, the element type, the number of dimensions), then one
/// big-endian uint32 per dimension, then the elements in row-major order. Only unsigned bytes
/// (type 0x08) are read here; that is what image and label files hold.
///
///   IdxArray images = read_idx_gz(dir / "train-images-idx3-ubyte.gz");  // shape {60000, 28, 28}
///   IdxArray labels = read_idx_gz(dir / "train-labels-idx1-ubyte.gz", 1000);  // the first 1000
///
/// Every failure is an std::runtime_error that names the file and what is wrong with it: missing,
/// not gzip or corrupt, not IDX, an element type other than unsigned bytes, or shorter than its
/// header says.
#include <cstdint>
#include <filesystem>
#include <vector>

namespace fashion {

struct IdxArray {
  std::vector<std::int64_t> shape;  ///< shape[0]: the number of items (after the limit)
  std::vector<std::uint8_t> data;   ///< product(shape) bytes, row-major
};

/// Reads a gzipped (or plain: zlib reads both) IDX file of unsigned bytes. `limit` >= 0 keeps only
/// the first `limit` items along the first dimension (and stops decompressing there); -1 keeps all.
IdxArray read_idx_gz(const std::filesystem::path& path, std::int64_t limit = -1);

}  // namespace fashion
