#include "nccl_check.hpp"

#include "ddprun/error.hpp"

namespace ddprun::detail::nccl {

void check_cuda(cudaError_t result, std::string_view call, std::source_location where) {
  if (result == cudaSuccess) return;
  // A non-sticky error also stays in the runtime's "last error"; clear it so that the caller's own
  // cudaGetLastError() does not report ours a second time.
  (void)cudaGetLastError();
  throw Error(std::string(call) + " failed: " + cudaGetErrorName(result) + ": " + cudaGetErrorString(result), where);
}

std::string nccl_error_text(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char* detail = ncclGetLastError(comm);
  if (detail != nullptr && *detail != '\0') text += std::string(": ") + detail;
  return text;
}

void check_nccl(ncclResult_t result, std::string_view call, ncclComm_t comm, std::source_location where) {
  if (result == ncclSuccess) return;
  throw Error(std::string(call) + " failed: " + nccl_error_text(result, comm), where);
}

ncclDataType_t nccl_type_of(DataType type) {
  switch (type) {
    case DataType::float32: return ncclFloat32;
    case DataType::float64: return ncclFloat64;
    case DataType::bfloat16: return ncclBfloat16;
    case DataType::float16: return ncclFloat16;
    case DataType::int32: return ncclInt32;
    case DataType::int64: return ncclInt64;
  }
  throw Error("nccl: unknown DataType " + std::to_string(static_cast<int>(type)));
}

ncclRedOp_t nccl_op_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::product: return ncclProd;
  }
  throw Error("nccl: unknown ReduceOp " + std::to_string(static_cast<int>(op)));
}

DeviceGuard::DeviceGuard(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
    switched_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (switched_) (void)cudaSetDevice(previous_);  // best effort: a destructor must not throw
}

}  // namespace ddprun::detail::nccl
