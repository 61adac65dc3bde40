// Coalesced broadcast: flatten each (dtype, device) group, broadcast, copy back.
#include "broadcast_tensors.hpp"

#include <map>
#include <tuple>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "device_sync.hpp"
#include "ddprun/torch/tensor_buffer.hpp"

namespace ddprun::torch::detail {

void broadcast_tensors(ProcessGroup& group, const std::vector<at::Tensor>& tensors, int root) {
  if (group.size() == 1 || tensors.empty()) return;
  ::torch::autograd::AutoGradMode no_grad(false);
  // std::map keeps the groups in the same order on every rank, as the collectives must be.
  using Key = std::tuple<int, int, int>;  // dtype, device type, device index
  std::map<Key, std::vector<at::Tensor>> groups;
  for (const auto& tensor : tensors) {
    require_data_type(tensor.scalar_type(), "a tensor to broadcast");
    groups[Key{static_cast<int>(tensor.scalar_type()), static_cast<int>(tensor.device().type()),
               tensor.device().index()}]
        .push_back(tensor);
  }
  for (auto& [key, members] : groups) {
    std::vector<at::Tensor> flat_parts;
    flat_parts.reserve(members.size());
    for (const auto& tensor : members) flat_parts.push_back(tensor.detach().reshape({-1}));
    at::Tensor flat = at::cat(flat_parts);
    wait_for_device_writes(flat);
    group.broadcast(buffer_of(flat), root);
    std::int64_t offset = 0;
    for (auto& tensor : members) {
      const std::int64_t count = tensor.numel();
      tensor.detach().copy_(flat.narrow(0, offset, count).view(tensor.sizes()));
      offset += count;
    }
  }
}

}  // namespace ddprun::torch::detail
