#pragma once
/// The default random generators' states, as tensors a checkpoint can hold.
#include <optional>

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

namespace ddprun::torch::detail {

/// The default generator of `device` (CPU, or a CUDA device's): a uint8 tensor on the CPU.
at::Tensor generator_state(c10::Device device);
/// Restores a state generator_state() returned for the same kind of device.
void set_generator_state(c10::Device device, const at::Tensor& state);

}  // namespace ddprun::torch::detail
