// The agent's reader of a worker's progress file, against files laid out by hand as the contract in
// common/progress_layout.hpp says (offsets, magic, seqlock): a published record, a
// file with nothing published, files of another format refused, a write caught in the middle
// retried, a writer that died mid-write, a file cut short after it was mapped or while it is read
// (a bad sample, never a SIGBUS), and a writer thread publishing while the reader reads.
#include "launcher/observe/progress_reader.hpp"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "scratch_folder.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using namespace progress_layout;

/// The 512 bytes of a version-1 file, written field by field at the documented offsets.
struct Image {
  unsigned char bytes[kFileSize] = {};
  template <class T>
  void put(std::size_t offset, T value) {
    std::memcpy(bytes + offset, &value, sizeof value);
  }
  static Image published(std::uint64_t sequence, std::int64_t step, std::int64_t samples, const std::string& text) {
    Image image;
    std::memcpy(image.bytes, "DDPRPRG1", 8);  // the magic, as bytes
    image.put<std::uint32_t>(kVersionAt, 1);
    image.put<std::uint32_t>(kSizeAt, 512);
    image.put<std::int32_t>(kPidAt, 4242);
    image.put<std::uint64_t>(kSequenceAt, sequence);
    image.put<std::int64_t>(kStepAt, step);
    image.put<std::int64_t>(kSamplesAt, samples);
    image.put<std::int64_t>(kTimestampAt, 123456789);
    image.put<std::uint32_t>(kTextLengthAt, static_cast<std::uint32_t>(text.size()));
    std::memcpy(image.bytes + kTextAt, text.data(), text.size());
    return image;
  }
  void write_to(const fs::path& path, std::size_t length = kFileSize) const {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes), static_cast<std::streamsize>(length));
  }
};

TEST(ProgressReader, TheMagicIsTheDocumentedBytes) {
  std::uint64_t magic = 0;
  std::memcpy(&magic, "DDPRPRG1", 8);
  EXPECT_EQ(magic, kMagic);
}

TEST(ProgressReader, ReadsFilesAsTheLayoutSays) {
  struct Case {
    const char* name;
    Image image;
    ProgressRead result;
  };
  Image wrong_magic = Image::published(2, 1, 1, "");
  std::memcpy(wrong_magic.bytes, "DDPRPRG2", 8);
  Image wrong_version = Image::published(2, 1, 1, "");
  wrong_version.put<std::uint32_t>(kVersionAt, 2);
  Image wrong_size = Image::published(2, 1, 1, "");
  wrong_size.put<std::uint32_t>(kSizeAt, 1024);
  Image too_long = Image::published(8, 9, 10, std::string(300, 'x'));
  too_long.put<std::uint32_t>(kTextLengthAt, 300);  // a length past the text field: cut to 256
  const std::vector<Case> cases{
      {"published", Image::published(14, 1204, 38528, "epoch 1 loss 0.31"), ProgressRead::ok},
      {"no text", Image::published(2, 0, 32, ""), ProgressRead::ok},
      {"nothing published", Image::published(0, 0, 0, ""), ProgressRead::unpublished},
      {"zeroed (no writer yet)", Image{}, ProgressRead::refused},
      {"wrong magic", wrong_magic, ProgressRead::refused},
      {"wrong version", wrong_version, ProgressRead::refused},
      {"wrong size field", wrong_size, ProgressRead::refused},
      {"writer died mid-write (odd sequence)", Image::published(7, 1, 1, ""), ProgressRead::busy},
      {"text length past the field", too_long, ProgressRead::ok},
  };
  testing_support::ScratchFolder scratch("progress_reader");
  for (const auto& c : cases) {
    const fs::path path = scratch.root() / "progress";
    c.image.write_to(path);
    auto file = ProgressFile::open(path.string());
    ASSERT_TRUE(file) << c.name;
    ProgressRecord record;
    EXPECT_EQ(file->read(record), c.result) << c.name;
  }
  // The values of a published record.
  const fs::path path = scratch.root() / "progress";
  Image::published(14, 1204, 38528, "epoch 1 loss 0.31").write_to(path);
  ProgressRecord record;
  ASSERT_EQ(ProgressFile::open(path.string())->read(record), ProgressRead::ok);
  EXPECT_EQ(record.generation, 7u);
  EXPECT_EQ(record.step, 1204);
  EXPECT_EQ(record.samples, 38528);
  EXPECT_EQ(record.timestamp_ns, 123456789);
  EXPECT_EQ(record.pid, 4242);
  EXPECT_EQ(record.text, "epoch 1 loss 0.31");
  too_long.write_to(path);
  ASSERT_EQ(ProgressFile::open(path.string())->read(record), ProgressRead::ok);
  EXPECT_EQ(record.text, std::string(256, 'x'));
}

TEST(ProgressReader, OpensOnlyAWholeRegularFile) {
  testing_support::ScratchFolder scratch("progress_open");
  std::string why;
  EXPECT_FALSE(ProgressFile::open((scratch.root() / "missing").string(), &why));
  EXPECT_NE(why, "");
  Image::published(2, 1, 1, "").write_to(scratch.root() / "short", 100);  // a writer between open and ftruncate
  EXPECT_FALSE(ProgressFile::open((scratch.root() / "short").string(), &why));
  fs::create_directory(scratch.root() / "dir");
  EXPECT_FALSE(ProgressFile::open((scratch.root() / "dir").string(), &why));
  ASSERT_EQ(::mkfifo((scratch.root() / "fifo").c_str(), 0600), 0);
  EXPECT_FALSE(ProgressFile::open((scratch.root() / "fifo").string(), &why));  // and does not block
}

TEST(ProgressReader, AFileCutShortAfterMappingIsRefusedNotAFault) {
  testing_support::ScratchFolder scratch("progress_cut");
  const fs::path path = scratch.root() / "progress";
  Image::published(2, 5, 5, "x").write_to(path);
  auto file = ProgressFile::open(path.string());
  ASSERT_TRUE(file);
  fs::resize_file(path, 0);  // reading the mapping now would be SIGBUS
  ProgressRecord record;
  EXPECT_EQ(file->read(record), ProgressRead::refused);
}

TEST(ProgressReader, AFileCutShortWhileItIsReadIsABadSampleNotAFault) {
  // A worker may cut its own file to nothing and write it back at any moment, also between the
  // reader's look at the size and its loads (issue 25): every read ends, none is a SIGBUS.
  testing_support::ScratchFolder scratch("progress_cut_race");
  const fs::path path = scratch.root() / "progress";
  const Image image = Image::published(2, 5, 7, "cut");
  image.write_to(path);
  auto file = ProgressFile::open(path.string());
  ASSERT_TRUE(file);
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  std::atomic<bool> done{false};
  std::atomic<int> cuts{0};
  std::thread cutter([&] {
    while (!done.load(std::memory_order_relaxed)) {
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, image.bytes, kFileSize, 0) != static_cast<ssize_t>(kFileSize)) break;
      cuts.fetch_add(1, std::memory_order_relaxed);
    }
  });
  // Reads until the file was cut 20,000 times (a read costs tens of ns, a cut microseconds).
  int ok = 0;
  int refused = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (cuts.load(std::memory_order_relaxed) < 20000 && std::chrono::steady_clock::now() < give_up) {
    ProgressRecord record;
    const ProgressRead read = file->read(record);
    refused += read == ProgressRead::refused;
    if (read != ProgressRead::ok) continue;
    ++ok;
    ASSERT_EQ(record.step, 5);
    ASSERT_EQ(record.samples, 7);
    ASSERT_EQ(record.text, "cut");
  }
  done = true;
  cutter.join();
  ::close(fd);
  // Whole again: read as before.
  ProgressRecord record;
  EXPECT_EQ(file->read(record), ProgressRead::ok);
  EXPECT_EQ(record.text, "cut");
  RecordProperty("ok_reads", ok);
  RecordProperty("refused_reads", refused);
}

/// The writer's protocol, as the contract states it, on a memory image.
void publish(unsigned char* memory, std::int64_t step, std::int64_t samples, const std::string& text) {
  auto* sequence = reinterpret_cast<std::uint64_t*>(memory + kSequenceAt);
  const std::uint64_t s = __atomic_load_n(sequence, __ATOMIC_RELAXED);
  __atomic_store_n(sequence, s + 1, __ATOMIC_RELAXED);
  std::atomic_thread_fence(std::memory_order_release);
  __atomic_store_n(reinterpret_cast<std::int64_t*>(memory + kStepAt), step, __ATOMIC_RELAXED);
  __atomic_store_n(reinterpret_cast<std::int64_t*>(memory + kSamplesAt), samples, __ATOMIC_RELAXED);
  __atomic_store_n(reinterpret_cast<std::uint32_t*>(memory + kTextLengthAt), static_cast<std::uint32_t>(text.size()),
                   __ATOMIC_RELAXED);
  std::uint64_t words[kMaxText / 8] = {};
  std::memcpy(words, text.data(), text.size());
  for (std::size_t i = 0; i < (text.size() + 7) / 8; ++i) {
    __atomic_store_n(reinterpret_cast<std::uint64_t*>(memory + kTextAt + 8 * i), words[i], __ATOMIC_RELAXED);
  }
  __atomic_store_n(sequence, s + 2, __ATOMIC_RELEASE);
}

TEST(ProgressReader, AWriteBetweenTheTwoLooksIsRetried) {
  Image image = Image::published(2, 1, 10, "one");
  struct Context {
    unsigned char* memory;
    int calls = 0;
  } context{image.bytes};
  ProgressRecord record;
  auto result = read_progress(image.bytes, 8, record, [](void* raw) {
    auto& c = *static_cast<Context*>(raw);
    if (c.calls++ == 0) publish(c.memory, 2, 20, "two");  // the first read is torn
  }, &context);
  ASSERT_EQ(result, ProgressRead::ok);
  EXPECT_EQ(context.calls, 2);
  EXPECT_EQ(record.generation, 2u);
  EXPECT_EQ(record.step, 2);
  EXPECT_EQ(record.samples, 20);
  EXPECT_EQ(record.text, "two");

  // A writer that writes between every two looks: no consistent read within the tries.
  context.calls = 0;
  result = read_progress(image.bytes, 5, record, [](void* raw) {
    auto& c = *static_cast<Context*>(raw);
    ++c.calls;
    publish(c.memory, 3, 30, "three");
  }, &context);
  EXPECT_EQ(result, ProgressRead::busy);
  EXPECT_EQ(context.calls, 5);
}

TEST(ProgressReader, EverySnapshotIsConsistentWhileAWriterPublishes) {
  testing_support::ScratchFolder scratch("progress_race");
  const fs::path path = scratch.root() / "progress";
  Image::published(0, 0, 0, "").write_to(path);
  auto file = ProgressFile::open(path.string());
  ASSERT_TRUE(file);
  // The writer's own mapping, as a worker has.
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  auto* memory = static_cast<unsigned char*>(::mmap(nullptr, kFileSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ::close(fd);
  ASSERT_NE(memory, MAP_FAILED);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (std::int64_t step = 1; !done.load(std::memory_order_relaxed); ++step) {
      publish(memory, step, 2 * step, "step " + std::to_string(step) + std::string(static_cast<std::size_t>(step % 200), '.'));
    }
  });
  // A read costs tens of ns: 200,000 of them can end before the writer thread ran at all, so the
  // reads go on until 1,000 of them saw a record (or a minute passed: then the check below fails).
  int ok = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  for (int i = 0; i < 200000 || (ok < 1000 && std::chrono::steady_clock::now() < give_up); ++i) {
    ProgressRecord record;
    if (file->read(record) != ProgressRead::ok) continue;
    ++ok;
    ASSERT_EQ(record.samples, 2 * record.step);
    ASSERT_EQ(record.text, "step " + std::to_string(record.step) + std::string(static_cast<std::size_t>(record.step % 200), '.'));
  }
  done = true;
  writer.join();
  ::munmap(memory, kFileSize);
  EXPECT_GT(ok, 0);
}

}  // namespace
}  // namespace ddprun::launcher
