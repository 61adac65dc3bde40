// The nccl backend. Without a GPU (this project's CI): asking for nccl is a clear ddprun::Error, never
// a crash, and `auto` picks gloo. With one GPU: world size 1 collectives on device memory, every
// element type, and a join that times out instead of hanging.
//
// The test needs a few CUDA runtime calls (cudaMalloc, cudaMemcpy) but is built like every runtime
// test, without CUDA's headers; so it looks them up in the process (dlsym): they are there exactly
// when ddprun::runtime was built with the nccl backend, which links CUDA's runtime.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ddprun/error.hpp"
#include "ddprun/process_group.hpp"
#include "../support/free_port.hpp"

namespace {

using namespace std::chrono_literals;
using ddprun::Backend;
using ddprun::Buffer;
using ddprun::DataType;
using ddprun::ProcessGroup;
using ddprun::ReduceOp;

// ---- the CUDA runtime, when linked -------------------------------------------------------------

/// The CUDA runtime calls the test needs, found in the process. cudaError_t is an int-sized enum
/// (0 = success); cudaMemcpyKind 1 = host to device, 2 = device to host.
struct Cuda {
  int (*get_device_count)(int*) = nullptr;
  int (*malloc)(void**, std::size_t) = nullptr;
  int (*free)(void*) = nullptr;
  int (*memcpy)(void*, const void*, std::size_t, int) = nullptr;

  static const Cuda& get() {
    static const Cuda cuda = [] {
      Cuda c;
      c.get_device_count = reinterpret_cast<int (*)(int*)>(::dlsym(RTLD_DEFAULT, "cudaGetDeviceCount"));
      c.malloc = reinterpret_cast<int (*)(void**, std::size_t)>(::dlsym(RTLD_DEFAULT, "cudaMalloc"));
      c.free = reinterpret_cast<int (*)(void*)>(::dlsym(RTLD_DEFAULT, "cudaFree"));
      c.memcpy = reinterpret_cast<int (*)(void*, const void*, std::size_t, int)>(::dlsym(RTLD_DEFAULT, "cudaMemcpy"));
      return c;
    }();
    return cuda;
  }
  bool linked() const { return get_device_count && malloc && free && memcpy; }
};

/// True when ddprun::runtime has the nccl backend (it links NCCL, whose symbols are then here).
bool nccl_built() { return ::dlsym(RTLD_DEFAULT, "ncclGetUniqueId") != nullptr && Cuda::get().linked(); }

/// True when this process sees a GPU. Initializes CUDA: the tests that need a fresh process run in
/// death-test children, which re-execute the binary.
bool has_gpu() {
  if (!nccl_built()) return false;
  int count = 0;
  return Cuda::get().get_device_count(&count) == 0 && count > 0;
}

/// `count` elements of T in device memory, filled from and read back to host vectors.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t count) : count_(count) {
    if (Cuda::get().malloc(&data_, count * sizeof(T)) != 0) throw std::runtime_error("cudaMalloc failed");
  }
  explicit DeviceArray(const std::vector<T>& values) : DeviceArray(values.size()) { upload(values); }
  ~DeviceArray() { Cuda::get().free(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void upload(const std::vector<T>& values) {
    if (Cuda::get().memcpy(data_, values.data(), count_ * sizeof(T), 1) != 0) throw std::runtime_error("upload failed");
  }
  std::vector<T> download() const {
    std::vector<T> values(count_);
    if (Cuda::get().memcpy(values.data(), data_, count_ * sizeof(T), 2) != 0) throw std::runtime_error("download failed");
    return values;
  }
  Buffer buffer() { return ddprun::buffer_of(static_cast<T*>(data_), count_); }

 private:
  void* data_ = nullptr;
  std::size_t count_;
};

using ddprun::testing::free_port;

ddprun::ProcessGroupOptions nccl_options(std::chrono::milliseconds timeout = 60s) {
  ddprun::ProcessGroupOptions options;
  options.backend = Backend::nccl;
  options.timeout = timeout;
  return options;
}

/// Element values as the test writes them: small integers, exact in every type. bfloat16 and
/// float16 are built from their bit patterns (1.0 = 0x3F80 / 0x3C00, 2.0 = 0x4000 / 0x4000...).
template <class T>
std::vector<T> sample_values(std::size_t count);
template <>
std::vector<float> sample_values(std::size_t count) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<float>(i % 97) - 48.0f;
  return v;
}
template <>
std::vector<double> sample_values(std::size_t count) {
  std::vector<double> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<double>(i % 89) * 0.5 - 20.0;
  return v;
}
template <>
std::vector<std::int32_t> sample_values(std::size_t count) {
  std::vector<std::int32_t> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<std::int32_t>(i % 1000) - 500;
  return v;
}
template <>
std::vector<std::int64_t> sample_values(std::size_t count) {
  std::vector<std::int64_t> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = (static_cast<std::int64_t>(i) << 33) - 7;
  return v;
}
template <>
std::vector<ddprun::BFloat16> sample_values(std::size_t count) {
  std::vector<ddprun::BFloat16> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i].bits = static_cast<std::uint16_t>(0x3F80 + (i % 64) * 0x10);  // 1.0 .. ~
  return v;
}
template <>
std::vector<ddprun::Float16> sample_values(std::size_t count) {
  std::vector<ddprun::Float16> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i].bits = static_cast<std::uint16_t>(0x3C00 + (i % 64) * 0x20);  // 1.0 .. ~
  return v;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

#define SKIP_WITHOUT_GPU()                                                                 \
  do {                                                                                     \
    if (!nccl_built()) GTEST_SKIP() << "ddprun::runtime was built without the nccl backend"; \
    if (!has_gpu()) GTEST_SKIP() << "no CUDA device visible";                              \
  } while (0)

// ---- without a device ----------------------------------------------------------------------------

/// In a fresh process (the death test re-executes the binary) that sees no device whatever the
/// machine has: CUDA_VISIBLE_DEVICES="" hides them all.
TEST(NcclWithoutDevice, HiddenDevicesGiveAClearError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string expected = nccl_built()
                                   ? "the nccl backend needs a CUDA device; this worker sees none \\(CUDA_VISIBLE_DEVICES=\"\""
                                   : "this build has no NCCL support";
  EXPECT_EXIT(
      {
        ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
        try {
          ProcessGroup::create(ddprun::Identity{}, nccl_options());
          std::fprintf(stderr, "created a nccl group without a device\n");
          std::_Exit(0);
        } catch (const ddprun::Error& error) {
          std::fprintf(stderr, "%s\n", error.what());
          std::_Exit(3);
        }
      },
      ::testing::ExitedWithCode(3), expected);
}

/// On this machine, as it is: the error when it has no GPU (skipped where it has one).
TEST(NcclWithoutDevice, RequestingNcclFailsWithAnErrorNamingTheDevices) {
  if (has_gpu()) GTEST_SKIP() << "this machine has a GPU";
  try {
    ProcessGroup::create(ddprun::Identity{}, nccl_options());
    FAIL() << "created a nccl group without a device";
  } catch (const ddprun::Error& error) {
    std::string message = error.what();
    if (nccl_built()) {
      EXPECT_NE(message.find("the nccl backend needs a CUDA device; this worker sees none (CUDA_VISIBLE_DEVICES"),
                std::string::npos)
          << message;
    } else {
      EXPECT_NE(message.find("no NCCL support"), std::string::npos) << message;
    }
  }
}

TEST(NcclWithoutDevice, AutomaticPicksGloo) {
  if (has_gpu()) GTEST_SKIP() << "this machine has a GPU";
  auto group = ProcessGroup::create(ddprun::Identity{}, ddprun::ProcessGroupOptions{});
  EXPECT_EQ(group->backend(), Backend::gloo);
}

// ---- with one GPU: world size 1 --------------------------------------------------------------------

TEST(NcclOneGpu, AutomaticPicksNccl) {
  SKIP_WITHOUT_GPU();
  auto group = ProcessGroup::create(ddprun::Identity{}, ddprun::ProcessGroupOptions{});
  EXPECT_EQ(group->backend(), Backend::nccl);
}

template <class T>
void check_collectives(ProcessGroup& group, std::size_t count) {
  SCOPED_TRACE(std::string(ddprun::name_of(ddprun::data_type_of<T>())) + " x " + std::to_string(count));
  const std::vector<T> values = sample_values<T>(count);
  // In a world of one, every reduction of one contribution is that contribution.
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max, ReduceOp::product}) {
    DeviceArray<T> array(values);
    group.all_reduce(array.buffer(), op);
    EXPECT_TRUE(same_bits(array.download(), values)) << "all_reduce " << ddprun::name_of(op);
  }
  {
    DeviceArray<T> array(values);
    group.broadcast(array.buffer(), 0);
    EXPECT_TRUE(same_bits(array.download(), values)) << "broadcast";
  }
  {
    // Out of place: the output starts as something else, so a no-op cannot pass.
    DeviceArray<T> input(values);
    DeviceArray<T> output{std::vector<T>(count)};
    group.all_gather(input.buffer(), output.buffer());
    EXPECT_TRUE(same_bits(output.download(), values)) << "all_gather";
  }
  {
    DeviceArray<T> input(values);
    DeviceArray<T> output{std::vector<T>(count)};
    group.reduce_scatter(input.buffer(), output.buffer(), ReduceOp::sum);
    EXPECT_TRUE(same_bits(output.download(), values)) << "reduce_scatter";
  }
}

TEST(NcclOneGpu, EveryCollectiveAndTypeAtWorldSizeOne) {
  SKIP_WITHOUT_GPU();
  auto group = ProcessGroup::create(ddprun::Identity{}, nccl_options());
  ASSERT_EQ(group->backend(), Backend::nccl);
  ASSERT_EQ(group->size(), 1);
  for (std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{1} << 20}) {
    check_collectives<float>(*group, count);
    check_collectives<double>(*group, count);
    check_collectives<ddprun::BFloat16>(*group, count);
    check_collectives<ddprun::Float16>(*group, count);
    check_collectives<std::int32_t>(*group, count);
    check_collectives<std::int64_t>(*group, count);
  }
  group->barrier();
}

TEST(NcclOneGpu, AsynchronousWorkCompletes) {
  SKIP_WITHOUT_GPU();
  auto group = ProcessGroup::create(ddprun::Identity{}, nccl_options());
  const std::vector<float> values = sample_values<float>(1 << 16);
  DeviceArray<float> input(values);
  DeviceArray<float> output{std::vector<float>(values.size())};
  std::vector<std::shared_ptr<ddprun::Work>> works;
  for (int i = 0; i < 8; ++i) works.push_back(group->all_reduce_async(input.buffer(), ReduceOp::sum));
  works.push_back(group->all_gather_async(input.buffer(), output.buffer()));
  works.push_back(group->barrier_async());
  for (auto& work : works) work->wait(30s);
  for (auto& work : works) EXPECT_TRUE(work->completed());
  EXPECT_TRUE(same_bits(output.download(), values));
}

TEST(NcclOneGpu, HostMemoryIsAnErrorThatNamesGloo) {
  SKIP_WITHOUT_GPU();
  auto group = ProcessGroup::create(ddprun::Identity{}, nccl_options());
  std::vector<float> host(16, 1.0f);
  try {
    group->all_reduce(ddprun::buffer_of(host.data(), host.size()));
    FAIL() << "all_reduce accepted host memory";
  } catch (const ddprun::Error& error) {
    EXPECT_NE(std::string(error.what()).find("not CUDA device memory"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("gloo"), std::string::npos) << error.what();
  }
  // Rejected before anything was queued: the group still works.
  DeviceArray<float> array{std::vector<float>(16, 2.0f)};
  group->all_reduce(array.buffer());
  EXPECT_EQ(array.download()[0], 2.0f);
}

/// Rank 0 of a world of two whose rank 1 never comes: the non-blocking join gives up after the
/// group's timeout with a TimeoutError instead of waiting forever.
TEST(NcclOneGpu, JoinTimesOutWhenAPeerNeverComes) {
  SKIP_WITHOUT_GPU();
  ddprun::Identity identity;
  identity.world_size = 2;
  identity.local_world_size = 2;
  identity.master_port = free_port();
  auto started = std::chrono::steady_clock::now();
  EXPECT_THROW(ProcessGroup::create(identity, nccl_options(3s)), ddprun::TimeoutError);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 60s);
}

}  // namespace
