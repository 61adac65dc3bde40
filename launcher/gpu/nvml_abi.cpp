#include "launcher/gpu/nvml_abi.hpp"

#include <array>
#include <string_view>

namespace ddprun::launcher {

std::string nvml_error_name(int code) {
  // nvml.h API 13, nvmlReturn_t, in order from 0.
  static constexpr std::array<std::string_view, 31> kNames = {
      "SUCCESS",          "UNINITIALIZED",     "INVALID_ARGUMENT",          "NOT_SUPPORTED",
      "NO_PERMISSION",    "ALREADY_INITIALIZED", "NOT_FOUND",               "INSUFFICIENT_SIZE",
      "INSUFFICIENT_POWER", "DRIVER_NOT_LOADED", "TIMEOUT",                 "IRQ_ISSUE",
      "LIBRARY_NOT_FOUND", "FUNCTION_NOT_FOUND", "CORRUPTED_INFOROM",       "GPU_IS_LOST",
      "RESET_REQUIRED",   "OPERATING_SYSTEM",  "LIB_RM_VERSION_MISMATCH",   "IN_USE",
      "MEMORY",           "NO_DATA",           "VGPU_ECC_NOT_SUPPORTED",    "INSUFFICIENT_RESOURCES",
      "FREQ_NOT_SUPPORTED", "ARGUMENT_VERSION_MISMATCH", "DEPRECATED",      "NOT_READY",
      "GPU_NOT_FOUND",    "INVALID_STATE",     "RESET_TYPE_NOT_SUPPORTED"};
  if (code >= 0 && static_cast<std::size_t>(code) < kNames.size()) return std::string(kNames[static_cast<std::size_t>(code)]);
  if (code == nvml::code::kUnknown) return "UNKNOWN";
  return "error " + std::to_string(code);
}

}  // namespace ddprun::launcher
