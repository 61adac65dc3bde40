#pragma once
/// Tensors as ddprun::Buffers: the dtype mapping and a view of a tensor's storage, host or device.
#include <optional>
#include <string>

#include <ATen/Tensor.h>
#include <c10/core/ScalarType.h>

#include "ddprun/types.hpp"

namespace ddprun::torch {

/// float32, float64, bfloat16, float16, int32, int64; nullopt for the others.
std::optional<DataType> data_type_of(c10::ScalarType type);
/// As above, but throws ddprun::Error naming the dtype and `what` (e.g. a parameter's name).
DataType require_data_type(c10::ScalarType type, const std::string& what);
c10::ScalarType scalar_type_of(DataType type);

/// A Buffer over all of `tensor`'s elements (CPU memory for gloo, CUDA memory for nccl). Throws
/// ddprun::Error unless the tensor is contiguous and of a supported dtype. The tensor must outlive
/// every operation on the buffer.
Buffer buffer_of(const at::Tensor& tensor);

}  // namespace ddprun::torch
