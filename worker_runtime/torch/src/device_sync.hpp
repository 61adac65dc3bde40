#pragma once
/// Ordering between LibTorch's CUDA stream and the process group's. The nccl backend's stream is a
/// blocking one, ordered after the legacy default stream, which is LibTorch's current stream unless
/// the trainer chose another; only then must the host wait before handing memory to the group.
#include <ATen/Tensor.h>

namespace ddprun::torch::detail {

/// Returns once kernels queued so far that write `tensor` are visible to the process group's
/// stream: nothing to do for CPU tensors and for CUDA tensors on the default stream; otherwise
/// synchronizes the tensor's current stream.
void wait_for_device_writes(const at::Tensor& tensor);

}  // namespace ddprun::torch::detail
