// portable/glibc_floor.cpp (the wheel's binaries): its arc4random and _dl_find_object against
// glibc's own, found by symbol version. This test binary links the same definitions and is linked
// as the wheel's binaries are (static libstdc++ and libgcc, tests/unit/CMakeLists.txt), so every
// exception it throws is unwound by libgcc_eh through the _dl_find_object defined here (one that
// gives no unwind tables ends the test in std::terminate: tried).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>

namespace {

using FindObject = int (*)(void*, dl_find_object*);

FindObject glibcs_find_object() {
  return reinterpret_cast<FindObject>(::dlvsym(RTLD_NEXT, "_dl_find_object", "GLIBC_2.35"));
}

int function_of_this_binary() { return 42; }

TEST(GlibcFloor, FindObjectAgreesWithGlibcs) {
  FindObject glibc = glibcs_find_object();
  if (glibc == nullptr) GTEST_SKIP() << "this glibc has no _dl_find_object (older than 2.35): nothing to compare with";
  ASSERT_NE(reinterpret_cast<void*>(glibc), reinterpret_cast<void*>(&_dl_find_object)) << "the test must call ours";
  struct Row {
    const char* what;
    void* address;
  };
  auto heap = std::make_unique<int>(1);
  const Row rows[] = {
      {"this binary's code", reinterpret_cast<void*>(&function_of_this_binary)},
      {"libc's printf", reinterpret_cast<void*>(&std::printf)},
      {"libc's getpid", reinterpret_cast<void*>(&::getpid)},
      {"libstdc++'s std::terminate", reinterpret_cast<void*>(&std::terminate)},
      {"libc's dlvsym", reinterpret_cast<void*>(&::dlvsym)},
      {"the heap (no object)", heap.get()},
      {"address 16 (no object)", reinterpret_cast<void*>(16)},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    dl_find_object ours{}, theirs{};
    int our_result = _dl_find_object(row.address, &ours);
    int their_result = glibc(row.address, &theirs);
    ASSERT_EQ(our_result, their_result);
    if (our_result != 0) continue;
    EXPECT_EQ(ours.dlfo_map_start, theirs.dlfo_map_start);
    EXPECT_EQ(ours.dlfo_eh_frame, theirs.dlfo_eh_frame);
    EXPECT_EQ(ours.dlfo_link_map, theirs.dlfo_link_map);
    // glibc's end is that of the mapping, page-rounded; ours that of the last segment.
    auto our_end = reinterpret_cast<uintptr_t>(ours.dlfo_map_end);
    auto their_end = reinterpret_cast<uintptr_t>(theirs.dlfo_map_end);
    EXPECT_LE(our_end, their_end);
    EXPECT_LT(their_end - our_end, static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE)));
    EXPECT_LT(reinterpret_cast<uintptr_t>(row.address), our_end);
  }
}

TEST(GlibcFloor, ExceptionsUnwindThroughIt) {
  // The unwinder of this binary resolves frames with the _dl_find_object defined here.
  auto thrower = [](int depth, auto&& self) -> int {
    if (depth == 0) throw std::runtime_error("from depth 0");
    return self(depth - 1, self) + 1;
  };
  try {
    thrower(20, thrower);
    FAIL() << "nothing was thrown";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "from depth 0");
  }
}

TEST(GlibcFloor, Arc4randomGivesRandomWords) {
  std::set<uint32_t> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(arc4random());
  EXPECT_GT(seen.size(), 995U);  // 1000 draws of 32 bits: a repeat is a 1-in-8,600 event
  uint32_t bits_set = 0, bits_clear = 0;
  for (uint32_t word : seen) {
    bits_set |= word;
    bits_clear |= ~word;
  }
  EXPECT_EQ(bits_set, 0xffffffffU);
  EXPECT_EQ(bits_clear, 0xffffffffU);
}

}  // namespace
