// The dtype mapping between LibTorch and ddprun, and Buffers over tensor storage.
#include "ddprun/torch/tensor_buffer.hpp"

#include <c10/util/Exception.h>

#include "ddprun/error.hpp"

namespace ddprun::torch {

std::optional<DataType> data_type_of(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return DataType::float32;
    case c10::ScalarType::Double: return DataType::float64;
    case c10::ScalarType::BFloat16: return DataType::bfloat16;
    case c10::ScalarType::Half: return DataType::float16;
    case c10::ScalarType::Int: return DataType::int32;
    case c10::ScalarType::Long: return DataType::int64;
    default: return std::nullopt;
  }
}

DataType require_data_type(c10::ScalarType type, const std::string& what) {
  if (auto mapped = data_type_of(type)) return *mapped;
  throw Error(what + " has dtype " + c10::toString(type) +
              ", which ddprun's collectives do not carry (float32, float64, bfloat16, float16, int32, int64)");
}

c10::ScalarType scalar_type_of(DataType type) {
  switch (type) {
    case DataType::float32: return c10::ScalarType::Float;
    case DataType::float64: return c10::ScalarType::Double;
    case DataType::bfloat16: return c10::ScalarType::BFloat16;
    case DataType::float16: return c10::ScalarType::Half;
    case DataType::int32: return c10::ScalarType::Int;
    case DataType::int64: return c10::ScalarType::Long;
  }
  throw Error("unknown ddprun::DataType " + std::to_string(static_cast<int>(type)));
}

Buffer buffer_of(const at::Tensor& tensor) {
  if (!tensor.defined()) throw Error("buffer_of: an undefined tensor");
  // A collective reads and writes count elements from data_ptr on: a strided view would be wrong.
  if (!tensor.is_contiguous()) throw Error("buffer_of: the tensor is not contiguous; call .contiguous() first");
  return Buffer{tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()),
                require_data_type(tensor.scalar_type(), "the tensor")};
}

}  // namespace ddprun::torch
