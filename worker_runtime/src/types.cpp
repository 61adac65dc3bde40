#include "ddprun/types.hpp"

namespace ddprun {

std::size_t size_of(DataType type) {
  switch (type) {
    case DataType::float32:
      return 4;
    case DataType::float64:
      return 8;
    case DataType::bfloat16:
      return 2;
    case DataType::float16:
      return 2;
    case DataType::int32:
      return 4;
    case DataType::int64:
      return 8;
  }
  return 0;
}

std::string_view name_of(DataType type) {
  switch (type) {
    case DataType::float32:
      return "float32";
    case DataType::float64:
      return "float64";
    case DataType::bfloat16:
      return "bfloat16";
    case DataType::float16:
      return "float16";
    case DataType::int32:
      return "int32";
    case DataType::int64:
      return "int64";
  }
  return "unknown type";
}

std::string_view name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
    case ReduceOp::product:
      return "product";
  }
  return "unknown op";
}

}  // namespace ddprun
