#pragma once
/// The stand-in NVML (tests/support/nvml_standin.c, built as NVML_STANDIN_LIBRARY) for a test of
/// this process: its control file in a scratch folder, named by DDPRUN_NVML_STANDIN, and a loaded,
/// initialised NvmlLibrary on it. The stand-in reads the file at every call, so a test changes
/// NVML's answers by writing it again.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "launcher/gpu/nvml_library.hpp"
#include "scratch_folder.hpp"

#ifndef NVML_STANDIN_LIBRARY
#error "NVML_STANDIN_LIBRARY: the path of the stand-in libnvidia-ml.so.1 (tests/unit/CMakeLists.txt)"
#endif

namespace ddprun::testing_support {

class NvmlStandin {
 public:
  NvmlStandin() : folder_("nvml") {
    control_ = (folder_.root() / "control").string();
    ::setenv("DDPRUN_NVML_STANDIN", control_.c_str(), 1);
  }
  ~NvmlStandin() {
    library_.reset();  // nvmlShutdown while the file still says what the test wanted
    ::unsetenv("DDPRUN_NVML_STANDIN");
  }

  /// NVML's answers from now on: the control file's lines.
  void answer(const std::string& lines) { folder_.write(control_, lines, 0644); }

  /// The stand-in loaded and nvmlInit_v2 called; fails the test when either fails (a load that
  /// fails throws: gtest reports it).
  launcher::NvmlLibrary& nvml() {
    if (!library_) {
      auto loaded = launcher::NvmlLibrary::load(NVML_STANDIN_LIBRARY);
      if (!loaded.ok()) throw std::runtime_error("the stand-in does not load: " + loaded.status.text);
      library_ = std::move(*loaded.value);
      auto init = library_->init();
      EXPECT_TRUE(init.ok()) << init.text;
    }
    return *library_;
  }

 private:
  ScratchFolder folder_;
  std::string control_;
  std::unique_ptr<launcher::NvmlLibrary> library_;
};

}  // namespace ddprun::testing_support
