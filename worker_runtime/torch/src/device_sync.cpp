// Stream ordering through c10's device-generic interface, so this compiles against CPU-only LibTorch.
#include "device_sync.hpp"

#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace ddprun::torch::detail {

void wait_for_device_writes(const at::Tensor& tensor) {
  const c10::Device device = tensor.device();
  if (device.is_cpu()) return;
  const c10::Stream stream = c10::impl::getDeviceGuardImpl(device.type())->getStream(device);
  if (stream.id() != 0) stream.synchronize();  // id 0: the default stream, already ordered
}

}  // namespace ddprun::torch::detail
