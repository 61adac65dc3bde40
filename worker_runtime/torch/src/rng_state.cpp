// Through at::Context's device-generic default generators, so that CUDA's compiles on CPU LibTorch.
#include "rng_state.hpp"

#include <mutex>

#include <ATen/Context.h>
#include <ATen/core/Generator.h>

namespace ddprun::torch::detail {

at::Tensor generator_state(c10::Device device) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard lock(generator.mutex());  // other threads may draw from it meanwhile
  return generator.get_state();
}

void set_generator_state(c10::Device device, const at::Tensor& state) {
  at::Generator generator = at::globalContext().defaultGenerator(device);
  std::lock_guard lock(generator.mutex());
  generator.set_state(state);
}

}  // namespace ddprun::torch::detail
