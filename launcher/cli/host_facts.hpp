#pragma once
/// What the command line's `gpu`/`cpu`/`auto` and the device checks count, passed in so that
/// parsing stays pure (read_host_facts in cli.hpp reads them from this machine).
#include <functional>
#include <string>

#include "launcher/devices/devices.hpp"

namespace ddprun::launcher {

struct HostFacts {
  HostFacts(int cpus = 1, int devices = 0) : cpu_count(cpus), device_count(devices) {}
  int cpu_count = 1;
  /// Without count_devices: the devices a worker would see, numbered 0..device_count-1.
  int device_count = 0;
  std::string device_source;  ///< where device_count came from (VisibleDevices::source), for messages
  /// When set, it fills device_count and device_source, asked only when they matter (`gpu`, `auto`,
  /// --devices-per-worker > 0): a driver may take seconds to answer.
  std::function<VisibleDevices()> count_devices;
};

}  // namespace ddprun::launcher
