#include "launcher/workers/worker_env.hpp"

#include <string_view>

#include "launcher/base/signal_names.hpp"

namespace ddprun::launcher {

std::string signals_to_handle_value(const std::vector<int>& signals) {
  std::string value;
  for (int signo : signals) value += (value.empty() ? "" : ",") + signal_name(signo);
  return value;
}

bool links_libtorch_1(const std::vector<std::string>& needed) {
  for (std::string_view name : needed) {
    for (std::string_view library : {"libtorch", "libtorch_cpu", "libtorch_cuda", "libc10", "libc10_cuda"}) {
      const std::string prefix = std::string(library) + ".so.1";
      if (name.starts_with(prefix) && (name.size() == prefix.size() || name[prefix.size()] == '.')) return true;
    }
  }
  return false;
}

std::string python_path_with(const std::string& dir, const std::optional<std::string>& current) {
  if (!current || current->empty()) return dir;
  if (*current == dir || current->rfind(dir + ":", 0) == 0) return *current;
  return dir + ":" + *current;
}

bool defaults_omp_num_threads(const Environ& base, int local_world_size) {
  return local_world_size > 1 && !base.contains("OMP_NUM_THREADS");
}

Environ build_worker_env(const Environ& base, const WorkerSpec& spec) {
  Environ env = base;
  auto set = [&env](const char* name, const std::string& value) { env[name] = value; };
  auto set_int = [&set](const char* name, int value) { set(name, std::to_string(value)); };

  set_int("LOCAL_RANK", spec.virtual_local_rank ? 0 : spec.local_rank);  // --virtual-local-rank: its one GPU is cuda:0
  set_int("RANK", spec.rank);
  set_int("GROUP_RANK", spec.group_rank);
  set_int("ROLE_RANK", spec.role_rank);
  set("ROLE_NAME", spec.role);
  set_int("LOCAL_WORLD_SIZE", spec.local_world_size);
  set_int("WORLD_SIZE", spec.world_size);
  set_int("GROUP_WORLD_SIZE", spec.group_world_size);
  set_int("ROLE_WORLD_SIZE", spec.role_world_size);
  set("MASTER_ADDR", spec.master_addr);
  set_int("MASTER_PORT", spec.master_port);
  set_int("TORCHELASTIC_RESTART_COUNT", spec.restart_count);
  set_int("TORCHELASTIC_MAX_RESTARTS", spec.max_restarts);
  set("TORCHELASTIC_RUN_ID", spec.run_id);
  // Python's bool spelling: PyTorch compares the string with "True".
  set("TORCHELASTIC_USE_AGENT_STORE", spec.use_agent_store ? "True" : "False");
  // torchrun 2.x sets it in its own environment, whatever was there, so its workers inherit it.
  set("TORCHELASTIC_SIGNALS_TO_HANDLE", spec.signals_to_handle);
  set("TORCHELASTIC_ERROR_FILE", spec.error_file);
  if (!spec.progress_file.empty()) set("DDPRUN_PROGRESS_FILE", spec.progress_file);
  if (!spec.python_dir.empty()) set("PYTHONPATH", python_path_with(spec.python_dir, lookup(base, "PYTHONPATH")));
  if (!spec.python_stacks_file.empty() && spec.stacks_signal > 0) {
    set("DDPRUN_PYTHON_STACKS_FILE", spec.python_stacks_file);
    set_int("DDPRUN_STACKS_SIGNAL", spec.stacks_signal);
  }
  // PyTorch 2.x reads the TORCH_ name, 1.x the old one; torchrun of each version sets its own. 2.x
  // warns about the old name, so it goes only to a worker known to run 1.x.
  env.try_emplace("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
  if (spec.libtorch_1) env.try_emplace("NCCL_ASYNC_ERROR_HANDLING", "1");
  if (defaults_omp_num_threads(base, spec.local_world_size)) set("OMP_NUM_THREADS", "1");
  if (spec.cuda_visible_devices) set("CUDA_VISIBLE_DEVICES", *spec.cuda_visible_devices);
  // On a pipe, Python block-buffers stdout: a wrapper script or a console entry point (run without
  // -u) would show nothing until it exits. On a pty it line-buffers by itself.
  if (spec.terminal == WorkerTerminal::pipes) env.try_emplace("PYTHONUNBUFFERED", "1");
  return env;
}

}  // namespace ddprun::launcher
