#pragma once
/// Checked CUDA and NCCL calls for the nccl backend: a failed call becomes a ddprun::Error that names
/// the call and carries the library's own text, thrown with the caller's file:line.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <source_location>
#include <string>
#include <string_view>

#include "ddprun/types.hpp"

namespace ddprun::detail::nccl {

/// Throws ddprun::Error("<call> failed: <cudaErrorName>: <text>") unless `result` is cudaSuccess.
void check_cuda(cudaError_t result, std::string_view call,
                std::source_location where = std::source_location::current());

/// Throws ddprun::Error("<call> failed: <nccl text>") unless `result` is ncclSuccess. With `comm`,
/// the text includes ncclGetLastError's detail (which peer, which socket...).
void check_nccl(ncclResult_t result, std::string_view call, ncclComm_t comm = nullptr,
                std::source_location where = std::source_location::current());

/// "ncclRemoteError (remote process exited or there was a network error): <last error>".
std::string nccl_error_text(ncclResult_t result, ncclComm_t comm);

ncclDataType_t nccl_type_of(DataType type);
ncclRedOp_t nccl_op_of(ReduceOp op);

/// Makes `device` current for a scope and restores the caller's device after: the group's
/// operations may come from a thread whose current device is another.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

}  // namespace ddprun::detail::nccl
