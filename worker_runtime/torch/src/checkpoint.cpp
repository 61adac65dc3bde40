// save_checkpoint / load_checkpoint: what a checkpoint holds and the collective protocol around the
// write (gather RNG states, rank 0 writes atomically, everyone learns the outcome).
#include "ddprun/torch/checkpoint.hpp"

#include <cstdlib>
#include <exception>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/core/List.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "atomic_file.hpp"
#include "ddprun/error.hpp"
#include "ddprun/torch/tensor_buffer.hpp"
#include "rng_state.hpp"

namespace ddprun::torch {
namespace {

constexpr std::int64_t format_version = 1;

/// The device of the module's first parameter or buffer; the CPU for a module without tensors.
c10::Device device_of(const ::torch::nn::Module& module) {
  for (const auto& tensor : module.parameters()) return tensor.device();
  for (const auto& tensor : module.buffers()) return tensor.device();
  return c10::Device(c10::kCPU);
}

/// Where collectives' buffers must live: the module's CUDA device for nccl, host memory for gloo.
c10::Device collective_device(const ProcessGroup& group, const ::torch::nn::Module& module) {
  return group.backend() == Backend::nccl ? device_of(module) : c10::Device(c10::kCPU);
}

/// Every rank's `bytes` (a uint8 tensor of the same length on every rank), as a [world, n] CPU tensor.
at::Tensor all_gather_bytes(ProcessGroup& group, const at::Tensor& bytes, c10::Device device) {
  const std::int64_t n = bytes.numel();
  const std::int64_t words = (n + 7) / 8;  // the collectives carry no bytes: pad into int64
  at::Tensor padded = at::zeros({words * 8}, at::kByte);
  padded.narrow(0, 0, n).copy_(bytes.reshape({-1}));
  at::Tensor input = padded.view(at::kLong).to(device);
  at::Tensor output = at::empty({group.size() * words}, input.options());
  group.all_gather(buffer_of(input), buffer_of(output));
  return output.cpu().view(at::kByte).reshape({group.size(), words * 8}).narrow(1, 0, n);
}

std::int64_t read_integer(::torch::serialize::InputArchive& archive, const std::string& key,
                          const std::filesystem::path& path) {
  c10::IValue value;
  if (!archive.try_read(key, value) || !value.isInt()) {
    throw Error("checkpoint " + path.string() + " has no integer '" + key + "'; was it written by ddprun::torch?");
  }
  return value.toInt();
}

/// Mirrors Module::save's layout (tensors by their own names, children as nested archives) and
/// copies into the existing tensors, so that their identity (and DDP's hooks on them) survives.
void load_module(::torch::nn::Module& module, ::torch::serialize::InputArchive& archive, const std::string& prefix,
                 const std::filesystem::path& path) {
  auto load_tensors = [&](const auto& named, bool is_buffer) {
    for (const auto& item : named) {
      at::Tensor target = item.value();
      if (!target.defined()) continue;
      at::Tensor loaded;
      const std::string name = prefix + item.key();
      if (!archive.try_read(item.key(), loaded, is_buffer)) {
        throw Error("checkpoint " + path.string() + " has no " + (is_buffer ? "buffer " : "parameter ") + name);
      }
      if (loaded.sizes() != target.sizes()) {
        throw Error("checkpoint " + path.string() + ": " + name + " has shape " + c10::str(loaded.sizes()) +
                    " there but " + c10::str(target.sizes()) + " in the model");
      }
      target.detach().copy_(loaded);
    }
  };
  load_tensors(module.named_parameters(/*recurse=*/false), false);
  load_tensors(module.named_buffers(/*recurse=*/false), true);
  for (const auto& child : module.named_children()) {
    ::torch::serialize::InputArchive nested;
    if (!archive.try_read(child.key(), nested)) {
      throw Error("checkpoint " + path.string() + " has no module " + prefix + child.key());
    }
    load_module(*child.value(), nested, prefix + child.key() + ".", path);
  }
}

int rank_from_environment() {
  const char* rank = std::getenv("RANK");
  return rank != nullptr && *rank != '\0' ? std::atoi(rank) : 0;
}

}  // namespace

void save_checkpoint(const std::filesystem::path& path, const ::torch::nn::Module& module,
                     const ::torch::optim::Optimizer* optimizer, CheckpointState state, ProcessGroup& group) {
  ::torch::autograd::AutoGradMode no_grad(false);
  const c10::Device device = collective_device(group, module);
  const c10::Device module_device = device_of(module);
  const at::Tensor cpu_rng = all_gather_bytes(group, detail::generator_state(c10::Device(c10::kCPU)), device);
  at::Tensor device_rng;
  if (module_device.is_cuda()) device_rng = all_gather_bytes(group, detail::generator_state(module_device), device);

  std::exception_ptr failure;
  if (group.rank() == 0) {
    try {
      ::torch::serialize::OutputArchive archive;
      archive.write("ddprun_checkpoint_format", c10::IValue(format_version));
      ::torch::serialize::OutputArchive model;
      module.save(model);
      archive.write("model", model);
      if (optimizer != nullptr) {
        ::torch::serialize::OutputArchive optimizer_archive;
        optimizer->save(optimizer_archive);
        archive.write("optimizer", optimizer_archive);
      }
      archive.write("epoch", c10::IValue(state.epoch));
      archive.write("step", c10::IValue(state.step));
      archive.write("sampler_epoch", c10::IValue(state.sampler_epoch));
      archive.write("world_size", c10::IValue(static_cast<std::int64_t>(group.size())));
      c10::List<std::string> names;
      std::vector<std::int64_t> numbers;
      for (const auto& [name, number] : state.values) {
        names.push_back(name);
        numbers.push_back(number);
      }
      archive.write("value_names", c10::IValue(names));
      archive.write("value_numbers", c10::IValue(numbers));
      archive.write("rng_cpu", cpu_rng.contiguous(), /*is_buffer=*/true);
      if (device_rng.defined()) archive.write("rng_device", device_rng.contiguous(), /*is_buffer=*/true);

      std::ostringstream bytes;
      archive.save_to(bytes);
      detail::write_file_atomically(path, bytes.view());
    } catch (...) {
      failure = std::current_exception();
    }
  }
  // The barrier, carrying rank 0's outcome so that no rank goes on believing the save worked.
  at::Tensor outcome = at::full({1}, failure ? 0 : 1, at::kInt).to(device);
  group.all_reduce(buffer_of(outcome), ReduceOp::min);
  if (failure) std::rethrow_exception(failure);
  if (outcome.cpu().item<std::int32_t>() == 0) {
    throw Error("checkpoint " + path.string() + ": rank 0 could not write it (its error says why)");
  }
}

std::optional<CheckpointState> load_checkpoint(const std::filesystem::path& path, ::torch::nn::Module& module,
                                               ::torch::optim::Optimizer* optimizer, c10::Device device, int rank) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return std::nullopt;
  if (rank < 0) rank = rank_from_environment();
  ::torch::autograd::AutoGradMode no_grad(false);

  ::torch::serialize::InputArchive archive;
  try {
    archive.load_from(path.string(), device);
  } catch (const std::exception& e) {
    throw Error("checkpoint " + path.string() + " could not be read: " + e.what());
  }
  const std::int64_t format = read_integer(archive, "ddprun_checkpoint_format", path);
  if (format != format_version) {
    throw Error("checkpoint " + path.string() + " has format " + std::to_string(format) + "; this build reads " +
                std::to_string(format_version));
  }

  ::torch::serialize::InputArchive model;
  if (!archive.try_read("model", model)) throw Error("checkpoint " + path.string() + " has no model");
  load_module(module, model, "", path);
  if (optimizer != nullptr) {
    ::torch::serialize::InputArchive optimizer_archive;
    if (!archive.try_read("optimizer", optimizer_archive)) {
      throw Error("checkpoint " + path.string() + " has no optimizer state (it was saved without an optimizer)");
    }
    optimizer->load(optimizer_archive);
  }

  CheckpointState state;
  state.epoch = read_integer(archive, "epoch", path);
  state.step = read_integer(archive, "step", path);
  state.sampler_epoch = read_integer(archive, "sampler_epoch", path);
  state.world_size = static_cast<int>(read_integer(archive, "world_size", path));
  c10::IValue names;
  c10::IValue numbers;
  if (archive.try_read("value_names", names) && archive.try_read("value_numbers", numbers)) {
    const auto number_list = numbers.toIntVector();
    const auto name_list = names.toListRef();
    for (std::size_t index = 0; index < name_list.size() && index < number_list.size(); ++index) {
      state.values[name_list[index].toStringRef()] = number_list[index];
    }
  }

  // A larger world than the one that saved (an elastic restart): the new ranks take rank 0's state.
  auto this_rank_state = [&](const at::Tensor& all) {
    const std::int64_t row = rank < all.size(0) ? rank : 0;
    return all[row].to(c10::kCPU).contiguous().clone();
  };
  at::Tensor cpu_rng;
  if (archive.try_read("rng_cpu", cpu_rng, /*is_buffer=*/true)) {
    detail::set_generator_state(c10::Device(c10::kCPU), this_rank_state(cpu_rng));
  }
  at::Tensor device_rng;
  if (device.is_cuda() && archive.try_read("rng_device", device_rng, /*is_buffer=*/true)) {
    detail::set_generator_state(device, this_rank_state(device_rng));
  }
  return state;
}

}  // namespace ddprun::torch
