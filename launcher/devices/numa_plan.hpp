#pragma once
/// `--numa-binding` on this machine: the topology read from sysfs, ddprun's own CPUs and each
/// worker's GPU, handed to the pure decision (numa_binding.hpp). Called once, before the first
/// worker starts; the answer holds for every attempt (the devices of a local rank never change).
#include "launcher/base/environ.hpp"
#include "launcher/cli/launch_config.hpp"
#include "launcher/devices/numa_binding.hpp"

namespace ddprun::launcher {

/// Reads the topology under DDPRUN_TEST_DEVICE_ROOT when set (a test hook, the same folder of
/// recorded /proc and /sys files the device count reads), else under "/"; the CPUs ddprun may use
/// from sched_getaffinity; the GPUs from `config.devices` and `env`'s CUDA_VISIBLE_DEVICES.
/// `config.numa_binding` must be set.
NumaBinding plan_numa_binding(const LaunchConfig& config, const Environ& env);

/// The CPUs ddprun itself may run on (sched_getaffinity); empty when the kernel does not say.
CpuSet own_cpu_affinity();

}  // namespace ddprun::launcher
