#pragma once
/// Checkpoints of a data-parallel job, as the PyTorch DDP tutorial teaches them: rank 0 saves, every
/// rank waits at a barrier, every rank loads onto its own device.
///
///   const std::filesystem::path path = dir / "checkpoint.pt";
///   ddprun::torch::CheckpointState state;
///   if (auto resumed = ddprun::torch::load_checkpoint(path, *model, &optimizer, device)) state = *resumed;
///   for (std::int64_t epoch = state.epoch; epoch < epochs; ++epoch) {
///     sampler.set_epoch(epoch);
///     ... train, ++state.step ...
///     state.epoch = epoch + 1;  // the epoch to resume at
///     state.sampler_epoch = epoch + 1;
///     ddprun::torch::save_checkpoint(path, *model, &optimizer, state, *group);
///   }
///
/// A file holds: the module's parameters and buffers (by their names), the optimizer's state, the
/// CheckpointState fields, and the default CPU generator's state of every rank (torch::manual_seed,
/// randn, dropout), so a resumed job draws the same random numbers as an uninterrupted one.
/// The format is LibTorch's serialize archive (a zip, as torch::save writes).
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "ddprun/process_group.hpp"

namespace ddprun::torch {

/// Where training stands; saved beside the model and restored by load_checkpoint.
struct CheckpointState {
  std::int64_t epoch = 0;          ///< by convention, the next epoch to run
  std::int64_t step = 0;           ///< optimizer steps taken
  std::int64_t sampler_epoch = 0;  ///< for DistributedSampler::set_epoch
  std::map<std::string, std::int64_t> values;  ///< any integers of the trainer's
  int world_size = 1;              ///< filled by save_checkpoint: the world that wrote it
};

/// Collective: every rank of `group` calls it with the same path. Every rank's RNG state is gathered
/// to rank 0; rank 0 writes the checkpoint atomically (a temporary file in the same folder, fsync,
/// rename over `path`, fsync the folder), so `path` always holds a complete checkpoint or the
/// previous one, never a partial file; then every rank meets at a barrier (an all_reduce of rank 0's
/// outcome), so a load after it sees the new file. Creates the folder when missing. When rank 0
/// cannot write, every rank throws ddprun::Error (rank 0's with the errno text). `optimizer` may be
/// null.
void save_checkpoint(const std::filesystem::path& path, const ::torch::nn::Module& module,
                     const ::torch::optim::Optimizer* optimizer, CheckpointState state, ProcessGroup& group);

/// Every rank (no collective): nullopt when `path` does not exist. Otherwise loads parameters and
/// buffers into `module` (whose tensors must already be on `device`, with the saved names and
/// shapes), the optimizer's state onto `device` (when `optimizer` is not null), and this rank's RNG
/// state (rank 0's when the checkpoint came from a smaller world); returns the saved state.
/// `rank` picks the RNG state; -1 = RANK from the environment (0 when unset).
/// Throws ddprun::Error naming the path and the mismatch (a missing or differently shaped tensor).
std::optional<CheckpointState> load_checkpoint(const std::filesystem::path& path, ::torch::nn::Module& module,
                                               ::torch::optim::Optimizer* optimizer,
                                               c10::Device device = c10::Device(c10::kCPU), int rank = -1);

}  // namespace ddprun::torch
