#pragma once
/// Replaces the test binary's global operator new and delete with ones that count the bytes asked
/// for, so that a test can show that a length a peer claims does not become an allocation: read
/// allocated_bytes() before and after. Include it from one source file of a binary only (each unit
/// test is one): these are the binary's only replacements.
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace ddprun::testing {

inline std::atomic<std::size_t> g_allocated_bytes{0};

/// Bytes asked of operator new so far in this process.
inline std::size_t allocated_bytes() { return g_allocated_bytes.load(std::memory_order_relaxed); }

}  // namespace ddprun::testing

void* operator new(std::size_t size) {
  ddprun::testing::g_allocated_bytes.fetch_add(size, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// g++ cannot see that this operator new is malloc and warns about the free below.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop
