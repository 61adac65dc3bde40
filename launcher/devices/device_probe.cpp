#include "launcher/devices/device_probe.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "common/integer.hpp"
#include "launcher/base/unique_fd.hpp"
#include "launcher/gpu/nvml_library.hpp"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;

constexpr auto kLibraryTimeout = std::chrono::seconds(20);

std::optional<int> count_entries(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  int count = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) ++count;
  return count;
}

/// A KFD topology node is a GPU when it has SIMDs; CPU nodes have simd_count 0 and gpu_id 0.
bool is_kfd_gpu(const fs::path& node) {
  std::ifstream properties(node / "properties");
  std::string key;
  long long value = 0;
  bool simds = false;
  while (properties >> key >> value) {
    if (key == "simd_count") simds = value > 0;
  }
  std::ifstream gpu_id_file(node / "gpu_id");
  long long gpu_id = 1;  // older kernels may lack the file: simd_count decides
  if (gpu_id_file && !(gpu_id_file >> gpu_id)) gpu_id = 1;
  return simds && gpu_id != 0;
}

std::optional<int> count_kfd_gpus(const fs::path& nodes) {
  std::error_code ec;
  if (!fs::is_directory(nodes, ec)) return std::nullopt;
  int count = 0;
  for (auto it = fs::directory_iterator(nodes, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (is_kfd_gpu(it->path())) ++count;
  }
  return count;
}

// ---------------------------------------------------------------------------------------------
// The libraries, asked in a child process. The child writes lines the parent parses:
//   nvml ok UUID...      nvml error TEXT      cuda ok N      cuda error TEXT

using CuInit = int (*)(unsigned);
using CuGetCount = int (*)(int*);
using CuErrorName = int (*)(int, const char**);

template <typename F>
F symbol(void* library, const char* name) {
  return reinterpret_cast<F>(::dlsym(library, name));
}

/// The UUIDs of every GPU NVML counts, through the one NVML loader (gpu/nvml_library.hpp), so that
/// DDPRUN_NVML_LIBRARY selects the library here as everywhere else.
std::string ask_nvml() {
  const char* setting = std::getenv("DDPRUN_NVML_LIBRARY");
  const std::string path = nvml_library_path(setting ? std::optional<std::string>(setting) : std::nullopt);
  auto loaded = NvmlLibrary::load(path);
  if (!loaded.ok()) return "nvml error " + path + " not loadable\n";  // dlerror's text is for -v, not this line
  NvmlLibrary& nvml = **loaded.value;
  auto describe = [](const char* call, const NvmlStatus& status) {
    return std::string("nvml error ") + call + " failed: " + status.text + "\n";
  };
  if (NvmlStatus init = nvml.init(); !init.ok()) return describe("nvmlInit_v2", init);
  auto count = nvml.device_count();
  if (!count.ok()) return describe("nvmlDeviceGetCount_v2", count.status);
  std::string line = "nvml ok";
  for (unsigned i = 0; i < *count.value; ++i) {
    // A GPU NVML cannot open still exists for CUDA's numbering: keep its place.
    auto device = nvml.device(i);
    auto uuid = device.ok() ? nvml.uuid(*device.value) : NvmlResult<std::string>{};
    line += " ";
    line += uuid.ok() && !uuid.value->empty() ? *uuid.value : "?";
  }
  return line + "\n";
}

std::string ask_cuda_driver() {
  void* cuda = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda == nullptr) return "cuda error libcuda.so.1 not loadable\n";
  auto init = symbol<CuInit>(cuda, "cuInit");
  auto get_count = symbol<CuGetCount>(cuda, "cuDeviceGetCount");
  auto error_name = symbol<CuErrorName>(cuda, "cuGetErrorName");
  if (!init || !get_count) return "cuda error libcuda.so.1 lacks cuInit\n";
  auto describe = [&](const char* call, int rc) {
    const char* name = nullptr;
    std::string text = error_name && error_name(rc, &name) == 0 && name ? name : "error " + std::to_string(rc);
    if (rc == 34) text = "CUDA_ERROR_STUB_LIBRARY, the toolkit's stub and no driver";
    return std::string("cuda error libcuda.so.1: ") + call + " failed: " + text + "\n";
  };
  // The stub library of the toolkit fails here (CUDA_ERROR_STUB_LIBRARY): it is no driver.
  if (int rc = init(0); rc != 0) return describe("cuInit", rc);
  int count = 0;
  if (int rc = get_count(&count); rc != 0) return describe("cuDeviceGetCount", rc);
  return "cuda ok " + std::to_string(count) + "\n";
}

void parse_answer(const std::string& text, DeviceFacts& facts) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string source;
    std::string status;
    words >> source >> status;
    std::string rest;
    std::getline(words, rest);
    if (!rest.empty() && rest.front() == ' ') rest.erase(0, 1);
    if (source == "nvml" && status == "ok") {
      std::vector<std::string> uuids;
      std::istringstream list(rest);
      for (std::string uuid; list >> uuid;) uuids.push_back(uuid);
      facts.nvml_uuids = std::move(uuids);
    } else if (source == "nvml") {
      facts.nvml_error = rest;
    } else if (source == "cuda" && status == "ok") {
      facts.cuda_count = common::parse_integer<int>(rest);  // nothing for a garbled answer, not a throw
    } else if (source == "cuda") {
      facts.cuda_error = rest;
    }
  }
}

void ask_libraries(DeviceFacts& facts) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    facts.nvml_error = std::string("cannot ask the driver: ") + std::strerror(errno);
    return;
  }
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  pid_t child = ::fork();
  if (child < 0) {
    facts.nvml_error = std::string("cannot ask the driver: ") + std::strerror(errno);
    return;
  }
  if (child == 0) {
    // A driver library's own complaints are not ddprun's output: the answer says what failed.
    if (int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC); null >= 0) {
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
    }
    std::string answer = ask_nvml();
    if (answer.starts_with("nvml error")) answer += ask_cuda_driver();
    for (std::size_t done = 0; done < answer.size();) {
      ssize_t n = ::write(write_end.get(), answer.data() + done, answer.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  write_end = UniqueFd();
  std::string answer;
  const auto deadline = std::chrono::steady_clock::now() + kLibraryTimeout;
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{read_end.get(), POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buffer[4096];
    ssize_t n = ::read(read_end.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    answer.append(buffer, static_cast<std::size_t>(n));
  }
  if (timed_out) ::kill(child, SIGKILL);
  while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    facts.nvml_error = "the NVIDIA driver did not answer in " + std::to_string(kLibraryTimeout.count()) + " s";
    return;
  }
  parse_answer(answer, facts);
  if (facts.nvml_error.empty() && !facts.nvml_uuids) facts.nvml_error = "the driver probe died";
}

}  // namespace

DeviceProbeSettings device_probe_settings(const std::optional<std::string>& test_root) {
  DeviceProbeSettings settings;
  if (test_root && !test_root->empty()) {
    settings.root = *test_root;
    settings.load_libraries = false;
  }
  return settings;
}

DeviceFacts probe_devices(const DeviceProbeSettings& settings) {
  DeviceFacts facts;
  if (settings.load_libraries) {
    ask_libraries(facts);
  } else {
    facts.nvml_error = "libraries not asked (DDPRUN_TEST_DEVICE_ROOT)";
    facts.cuda_error = facts.nvml_error;
  }
  facts.proc_nvidia_gpus = count_entries(settings.root / "proc/driver/nvidia/gpus");
  facts.kfd_gpus = count_kfd_gpus(settings.root / "sys/class/kfd/kfd/topology/nodes");
  return facts;
}

}  // namespace ddprun::launcher
