#pragma once
// A GPU a worker works on, every field known, for the tests of what shows the ranks' GPUs
// (status_json, metrics_text): an H100 at 97 %, 60 GiB of it the worker's own, power-capped, two Xids.
#include "launcher/observe/job_status.hpp"

namespace ddprun::launcher::testing {

inline RankGpu busy_gpu() {
  RankGpu busy;
  busy.index = 3;
  busy.uuid = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6";
  busy.bus_id = "00000000:3B:00.0";
  busy.utilisation_percent = 97;
  busy.memory_used_bytes = 65'498'251'264ull;
  busy.memory_total_bytes = 85'899'345'920ull;
  busy.own_memory_bytes = 64'424'509'440ull;
  busy.temperature_c = 71;
  busy.power_watts = 612.5;
  busy.throttle = {"SwPowerCap", "HwSlowdown"};
  busy.uncorrectable_ecc_errors = 0;
  busy.xid_count = 2;
  busy.xids = {13, 79};
  return busy;
}

}  // namespace ddprun::launcher::testing
