// examples/torch/idx_reader: gzipped IDX files read right, and every malformed one refused with a
// message that names the file and the problem. The files are written here with zlib.
#include "idx_reader.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

class IdxReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("idx_reader_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Writes `bytes` gzipped (or plain) to a new file of the test's folder.
  fs::path write(const std::string& name, const std::vector<std::uint8_t>& bytes, bool gzip = true) {
    const fs::path path = dir_ / name;
    if (gzip) {
      gzFile file = gzopen(path.c_str(), "wb");
      EXPECT_NE(file, nullptr);
      if (!bytes.empty()) {
        EXPECT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
      }
      gzclose(file);
    } else {
      FILE* file = std::fopen(path.c_str(), "wb");
      std::fwrite(bytes.data(), 1, bytes.size(), file);
      std::fclose(file);
    }
    return path;
  }

  /// An IDX file of unsigned bytes: header for `shape`, then 0, 1, 2, ... (mod 256).
  static std::vector<std::uint8_t> idx(const std::vector<std::uint32_t>& shape, std::uint8_t type = 0x08,
                                       std::int64_t drop_tail = 0) {
    std::vector<std::uint8_t> bytes{0, 0, type, static_cast<std::uint8_t>(shape.size())};
    std::uint64_t count = 1;
    for (std::uint32_t size : shape) {
      for (int shift : {24, 16, 8, 0}) bytes.push_back(static_cast<std::uint8_t>(size >> shift));
      count *= size;
    }
    for (std::uint64_t i = 0; i + drop_tail < count; ++i) bytes.push_back(static_cast<std::uint8_t>(i));
    return bytes;
  }

  static std::string error_of(const fs::path& path, std::int64_t limit = -1) {
    try {
      fashion::read_idx_gz(path, limit);
    } catch (const std::runtime_error& error) {
      return error.what();
    }
    return "(no error)";
  }

  fs::path dir_;
};

TEST_F(IdxReaderTest, ReadsShapeAndData) {
  const auto array = fashion::read_idx_gz(write("images.gz", idx({3, 2, 4})));
  EXPECT_EQ(array.shape, (std::vector<std::int64_t>{3, 2, 4}));
  ASSERT_EQ(array.data.size(), 24u);
  for (std::size_t i = 0; i < 24; ++i) EXPECT_EQ(array.data[i], i);
}

TEST_F(IdxReaderTest, LimitKeepsTheFirstItems) {
  const auto path = write("labels.gz", idx({10}));
  const auto first = fashion::read_idx_gz(path, 4);
  EXPECT_EQ(first.shape, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(first.data, (std::vector<std::uint8_t>{0, 1, 2, 3}));
  EXPECT_EQ(fashion::read_idx_gz(path, 0).data.size(), 0u);
  EXPECT_EQ(fashion::read_idx_gz(path, 99).shape[0], 10);  // a limit beyond the file keeps all
  const auto images = fashion::read_idx_gz(write("images.gz", idx({5, 3, 3})), 2);
  EXPECT_EQ(images.shape, (std::vector<std::int64_t>{2, 3, 3}));
  EXPECT_EQ(images.data.size(), 18u);
}

TEST_F(IdxReaderTest, ReadsUncompressedFilesToo) {
  EXPECT_EQ(fashion::read_idx_gz(write("plain", idx({2, 2}), false)).data.size(), 4u);
}

TEST_F(IdxReaderTest, MissingFileNamesThePackage) {
  const std::string message = error_of(dir_ / "absent.gz");
  EXPECT_NE(message.find("absent.gz: cannot open: No such file or directory"), std::string::npos) << message;
  EXPECT_NE(message.find("dataset-fashion-mnist"), std::string::npos) << message;
}

TEST_F(IdxReaderTest, RefusesWhatIsNotIdx) {
  const std::string message = error_of(write("text.gz", {'h', 'e', 'l', 'l', 'o', '!', '!', '!'}));
  EXPECT_NE(message.find("text.gz: not an IDX file"), std::string::npos) << message;
}

TEST_F(IdxReaderTest, RefusesOtherElementTypes) {
  const std::string message = error_of(write("floats.gz", idx({2}, 0x0d)));
  EXPECT_NE(message.find("element type 0x0d is not supported"), std::string::npos) << message;
}

TEST_F(IdxReaderTest, RefusesImplausibleDimensions) {
  const std::string message = error_of(write("huge.gz", {0, 0, 8, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                                        0xff, 0xff, 0xff, 0xff}));
  EXPECT_NE(message.find("huge.gz: an IDX header with implausible dimensions"), std::string::npos) << message;
}

TEST_F(IdxReaderTest, RefusesTruncatedFiles) {
  std::string message = error_of(write("short.gz", idx({4, 4}, 0x08, 3)));
  EXPECT_NE(message.find("short.gz: the file ends in the middle of the data"), std::string::npos) << message;
  message = error_of(write("header.gz", {0, 0, 8, 3, 0, 0}));
  EXPECT_NE(message.find("ends in the middle of the IDX header"), std::string::npos) << message;
  message = error_of(write("empty.gz", {}));
  EXPECT_NE(message.find("ends in the middle of the IDX header"), std::string::npos) << message;
}

TEST_F(IdxReaderTest, RefusesCorruptGzip) {
  std::vector<std::uint8_t> bytes = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};  // a gzip header, then garbage
  for (int i = 0; i < 64; ++i) bytes.push_back(static_cast<std::uint8_t>(0xff - i));
  std::string message = error_of(write("corrupt.gz", bytes, false));
  EXPECT_NE(message.find("corrupt.gz: cannot decompress it: invalid block type"), std::string::npos) << message;

  // A whole gzip stream whose trailer (CRC-32 and length) was zeroed.
  write("good.gz", idx({100}));
  std::vector<std::uint8_t> stream(fs::file_size(dir_ / "good.gz"));
  FILE* file = std::fopen((dir_ / "good.gz").c_str(), "rb");
  ASSERT_EQ(std::fread(stream.data(), 1, stream.size(), file), stream.size());
  std::fclose(file);
  std::fill(stream.end() - 8, stream.end(), 0);
  message = error_of(write("bad_crc.gz", stream, false));
  EXPECT_NE(message.find("bad_crc.gz: cannot decompress it: incorrect data check"), std::string::npos) << message;
}

TEST_F(IdxReaderTest, ReadsDebiansFashionMnist) {
  const fs::path dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir / "t10k-labels-idx1-ubyte.gz")) GTEST_SKIP() << "no dataset-fashion-mnist";
  const auto labels = fashion::read_idx_gz(dir / "t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(labels.shape, (std::vector<std::int64_t>{10000}));
  const auto images = fashion::read_idx_gz(dir / "t10k-images-idx3-ubyte.gz", 100);
  EXPECT_EQ(images.shape, (std::vector<std::int64_t>{100, 28, 28}));
}

}  // namespace
