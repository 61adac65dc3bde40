#include "launcher/agent.hpp"

#include <signal.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <utility>

#include "launcher/agent_support.hpp"
#include "launcher/output/console.hpp"
#include "launcher/base/errors.hpp"
#include "launcher/report/failure_rule.hpp"
#include "launcher/forward_rule.hpp"
#include "launcher/workers/guardian.hpp"
#include "launcher/workers/job_cgroup.hpp"
#include "launcher/workers/reaper.hpp"
#include "launcher/workers/warm_pool.hpp"
#include "launcher/fleet/session_watch.hpp"
#include "launcher/base/python_dir.hpp"
#include "launcher/base/signal_names.hpp"
#include "launcher/observe/board_link.hpp"
#include "launcher/observe/event_recorder.hpp"
#include "launcher/observe/hang_summary.hpp"
#include "launcher/observe/hang_watch.hpp"
#include "launcher/observe/node_stacks.hpp"
#include "launcher/observe/status_service.hpp"
#include "launcher/observe/status_watch.hpp"
#include "launcher/rounds/node_rounds.hpp"
#include "launcher/terminal/job_terminal.hpp"
#include "launcher/terminal/terminal_window.hpp"
#include "launcher/cli/verbose.hpp"
#include "launcher/devices/gpu_gate.hpp"
#include "launcher/gpu/gpu_sampler.hpp"
#include "launcher/gpu/nvml_library.hpp"
#include "launcher/observe/status_monitor.hpp"
#include "launcher/workers/worker_env.hpp"
#include "launcher/workers/worker_group.hpp"
#include "rendezvous/endpoint.hpp"
#include "rendezvous/open_file_limit.hpp"
#include "rendezvous/error.hpp"
#include "rendezvous/store_server.hpp"

namespace asio = boost::asio;

namespace ddprun::launcher {
namespace {

/// -v: the launch config, as torchrun logs it with LOGLEVEL=INFO (verbose.hpp). `master`: the
/// single-node store's address.
void print_launch_config(const AgentPlan& plan, const rendezvous::Endpoint& master, const RunLogs& logs) {
  LaunchFacts facts;
  facts.executable = plan.command.executable;
  facts.argv = plan.command.argv;
  if (plan.command.python) facts.interpreter = describe_python(*plan.command.python);
  facts.device_source = plan.config.device_source;
  if (!plan.config.topology.multi_node) facts.master = rendezvous::format_endpoint(master.host, master.port);
  facts.log_dir = logs.run_dir().string();
  for (const auto& line : describe_launch_config(plan.config, facts)) print_line(line);
}

/// Which GPUs each worker sees: its own CUDA_VISIBLE_DEVICES (--devices-per-worker,
/// --virtual-local-rank), else the one it inherits.
GpuSight gpu_sight_of(const std::vector<WorkerSpec>& specs, const Environ& env) {
  GpuSight sight;
  const auto inherited = lookup(env, "CUDA_VISIBLE_DEVICES");
  for (const WorkerSpec& spec : specs) {
    sight.cuda_visible_devices.push_back(spec.cuda_visible_devices ? spec.cuda_visible_devices : inherited);
  }
  sight.cuda_device_order = lookup(env, "CUDA_DEVICE_ORDER");
  return sight;
}

}  // namespace

Agent::Agent(AgentPlan plan)
    : plan_(std::move(plan)),
      finish_timer_(io_),
      child_exits_(io_, SIGCHLD),
      stop_signals_(io_),
      workers_(plan_.config, plan_.command, plan_.env, plan_.hostname),
      failure_record_(plan_.hostname, plan_.command.python ? describe_python(*plan_.command.python) : std::string(),
                      OomWatch::for_this_process()) {
  state_.multi_node = plan_.config.topology.multi_node;
  state_.elastic = state_.multi_node && plan_.config.topology.min_nodes != plan_.config.topology.max_nodes;
  state_.max_restarts = plan_.config.max_restarts;
  state_.hang_action = plan_.config.hang_action;
}

Agent::~Agent() = default;

void Agent::dispatch(SupervisorEvent event) {
  pending_events_.push_back(std::move(event));
  if (dispatching_) return;
  dispatching_ = true;
  while (!pending_events_.empty()) {
    SupervisorEvent next_event = std::move(pending_events_.front());
    pending_events_.pop_front();
    for (const SupervisorAction& action : next(state_, next_event)) perform(action);
  }
  dispatching_ = false;
}

void Agent::perform(const SupervisorAction& action) {
  struct Performer {
    Agent& a;
    void operator()(const action::StartGroup&) const { a.start_attempt(); }
    void operator()(const action::StopGroup& s) const { a.group_->stop(s.signo, grace_of(a.plan_.config), s.hold); }
    void operator()(const action::KillGroup&) const { a.group_->stop(SIGKILL, std::chrono::milliseconds(0)); }
    void operator()(const action::KillRunning&) const { a.group_->signal_running(SIGKILL); }
    void operator()(const action::RecordFailure& r) const {
      a.failure_record_.record(r.exit, a.place_.rank_base + r.exit.local_rank, a.group_->stderr_tail_of(r.exit.local_rank));
    }
    // Round actions come to a multi-node job only (supervisor.hpp), which has rounds_.
    void operator()(const action::ReportFailure& r) const { a.rounds_->report_failure(r.end); }
    void operator()(const action::MarkFinished&) const { a.rounds_->mark_finished(); }
    void operator()(const action::JoinRound&) const { a.rounds_->join(); }
    void operator()(const action::EnterRound& e) const { a.enter_round(e.decision); }
    void operator()(const action::CloseRound&) const { a.close_round(); }
    void operator()(const action::Leave& l) const { a.rounds_->leave(l.end); }
    void operator()(const action::LingerStore&) const { a.rounds_->linger_store(); }
    void operator()(const action::Print& p) const { print_line(p.text); }
    void operator()(const action::PrintFailureSummary&) const { a.print_failure_summary(); }
    void operator()(const action::Finish& f) const { a.finish(f.impatient); }  // run() returns state_.exit_status
    void operator()(const action::StopLoop&) const { a.io_.stop(); }
    void operator()(const action::CaptureStacks&) const { a.hang_->capture(); }
  };
  std::visit(Performer{*this}, action);
}

int Agent::run() {
  const LaunchConfig& config = plan_.config;
  // First, while this process has one thread: the guardian is forked, and the job's cgroup (every
  // worker is created in it) made, so that nothing the workers start survives ddprun, even a SIGKILLed one.
  if (lookup(plan_.env, "DDPRUN_JOB_CGROUP").value_or("") != "off") cgroup_ = JobCgroup::create();
  const std::string marker = new_guardian_marker();
  plan_.env[kGuardianMarkVariable] = marker;
  guardian_ = Guardian::start(cgroup_ ? cgroup_->dir() : std::string(), marker);
  console_.emplace(io_);
  start_gpu_watch();
  JobFacts facts;
  facts.run_id = config.rdzv_id;
  facts.host = plan_.hostname;
  facts.nproc_per_node = config.topology.nproc_per_node;
  facts.min_nodes = config.topology.min_nodes;
  facts.max_nodes = config.topology.max_nodes;
  facts.max_restarts = config.max_restarts;
  facts.command = plan_.command.argv;
  facts.multi_node = config.topology.multi_node;
  if (config.rendezvous.is_static) facts.static_node_rank = config.topology.node_rank;
  events_ = std::make_unique<EventRecorder>(io_, std::move(facts), place_, [](const std::string& line) { print_line(line); });
  events_->open_log(config.events_file);  // before anything starts: an unusable file fails the job at once
  // A pty per worker, ddprun's stdin forwarded, the window size passed on, Ctrl-Z for the job.
  JobTerminalHandlers terminal;
  terminal.signal_workers = [this](int signo) {
    if (group_) group_->signal_running(signo);
  };
  terminal.window_changed = [this](const std::optional<winsize>& window) {
    if (window && group_) group_->set_window(*window);
    if (console_) console_->out().refresh_size();
  };
  terminal.print = print_line;
  terminal_ = std::make_unique<JobTerminal>(io_, terminal_settings(config), std::move(terminal));
  become_subreaper();
  for (int signo : config.signals_to_handle) stop_signals_.add(signo);
  // --forward-signals (Slurm warns of preemption with SIGUSR1/SIGUSR2): passed on, the job goes on.
  // SIGUSR1/SIGUSR2 are caught even when not forwarded, so that they never end ddprun (their
  // default action); caught, not ignored, so that workers still start with the default.
  std::vector<int> caught;
  for (int signo : config.signals_to_forward) caught.push_back(signo);
  for (int signo : {SIGUSR1, SIGUSR2}) {
    if (std::find(caught.begin(), caught.end(), signo) == caught.end()) caught.push_back(signo);
  }
  std::erase_if(caught, [&](int signo) {
    return std::find(config.signals_to_handle.begin(), config.signals_to_handle.end(), signo) !=
           config.signals_to_handle.end();
  });
  forwarded_signals_.emplace(io_, caught, [this](const SignalOrigin& origin) { on_forwarded_signal(origin); });
  wait_child_exits();
  wait_stop_signals();
  StatusWatchSettings status;
  status.block = config.status != StatusMode::off;
  status.block_insisted = config.status == StatusMode::on;
  status.color = use_color(plan_.env, console_->out().fd());
  status.interval_s = config.status_interval_s;
  status.samples_wanted = config.hang_timeout_s > 0 || config.status_port.has_value();
  status.host = plan_.hostname;
  status.nproc_per_node = config.topology.nproc_per_node;
  status_ = std::make_unique<StatusWatch>(io_, console_->out(), std::move(status), place_, *events_,
                                          [this](std::vector<WorkerView>& workers) {
                                            if (group_) group_->describe(workers);
                                          });
  status_->set_gpus(gpu_sampler_.get(), {});  // what each worker sees: set as each attempt starts
  // Started over ssh by a launching ddprun (--hostfile): its session ending stops the job as SIGHUP does.
  auto session = watch_session(io_, plan_.env, [this](const std::string& why) {
    print_line(why);
    dispatch(event::StopSignal{SIGHUP});
  });

  const bool multi_node = config.topology.multi_node;
  // First: a busy port fails the job before anything is created.
  if (multi_node) {
    start_rendezvous();
  } else {
    start_store();
  }
  logs_.emplace(config.log_dir, config.rdzv_id);
  start_observers();
  if (config.verbose) print_launch_config(plan_, master_, *logs_);

  if (defaults_omp_num_threads(plan_.env, config.topology.nproc_per_node)) print_line(std::string("warning: ") + kOmpWarning);
  for (const auto& notice : config.notices) print_line("note: " + notice);
  if (config.numa_binding) {
    for (const auto& line : workers_.plan_numa_binding()) print_line(line);
  }
  start_warm_pool();

  events_->job_started();
  try {
    dispatch(event::Started{});
    io_.run();
  } catch (...) {
    if (group_) group_->signal_running(SIGKILL);
    clean_up();
    throw;
  }
  // Run what the last events posted (the retired group's release) while the loop still exists.
  io_.restart();
  io_.poll();

  clean_up();
  if (rounds_) rounds_->drop_membership();  // its connections close before the stores they may be talking to
  io_.restart();
  io_.poll();  // what the membership's cancelled operations left to run
  if (rounds_) rounds_->stop_worker_store();
  // The job ended on every node: the others may still be reading that end from our store.
  if (store_ && rounds_ && rounds_->lingers()) store_->wait_until_idle(rounds_->close_timeout());
  if (store_) store_->stop();
  if (state_.exit_status == kExitSuccess) logs_->remove_if_temporary();
  return state_.exit_status;
}

void Agent::clean_up() {
  if (gpu_gate_) gpu_gate_->cancel();
  endpoint_.reset();  // its socket and registry entry go with the job
  warm_.reset();      // the waiting interpreters killed; reaped below with what else is left
  kill_remaining_children(guardian_ ? guardian_->pid() : 0);
  cgroup_.reset();  // what left our tree for good (under another subreaper) is still in the cgroup
  if (terminal_) terminal_->stop_forwarding_stdin();  // ddprun's terminal back in its own mode, whatever the way out
  // The guardian stays until ddprun exits, and then has nothing to do.
  if (guardian_) guardian_->mark_clean();
  console_.reset();  // ddprun's last lines (after run) are written directly
}

void Agent::start_gpu_watch() {
  GpuSamplerSettings sampler;
  sampler.library_path = nvml_library_path(lookup(plan_.env, "DDPRUN_NVML_LIBRARY"));
  gpu_sampler_ = std::make_unique<GpuSampler>(io_, std::move(sampler));
  GpuGateSettings gate;
  gate.health = plan_.config.gpu_health;
  gate.release_timeout = std::chrono::milliseconds(static_cast<long long>(plan_.config.gpu_release_timeout_s * 1000));
  gpu_gate_ = std::make_unique<GpuGate>(io_, *gpu_sampler_, gate, [](const std::string& line) { print_line(line); });
}

void Agent::start_warm_pool() {
  const LaunchConfig& config = plan_.config;
  if (config.preload.empty()) return;
  std::optional<std::filesystem::path> python_dir = find_python_dir();
  if (!python_dir) {
    print_line("warning: --preload: ddprun's Python modules are not beside it (../share/ddprun/python): the workers start cold");
    return;
  }
  WarmPoolSettings settings;
  settings.modules = config.preload;
  settings.python_dir = python_dir->string();
  settings.base_env = plan_.env;
  settings.spawn.cgroup_fd = cgroup_ ? cgroup_->dir_fd() : -1;
  settings.spawn.window = terminal_window();
  WarmPoolHandlers handlers;
  handlers.on_spawned = [this](pid_t pgid) {
    if (guardian_) guardian_->watch(pgid);
  };
  handlers.on_gone = [this](pid_t pgid) {
    if (guardian_) guardian_->forget(pgid);
  };
  handlers.on_cold = [](const std::string& line) { print_line(line); };
  warm_ = std::make_unique<WarmPool>(io_, std::move(settings), std::move(handlers));
  status_->set_warm_source([this](std::vector<WarmInterpreter>& out) {
    if (!warm_) return;
    for (const WarmView& view : warm_->describe()) out.push_back(WarmInterpreter{view.local_rank, view.pid, view.ready});
  });
  warm_->warm(specs_to_warm());
}

std::vector<WorkerSpec> Agent::specs_to_warm() const {
  AttemptFacts facts;
  facts.place = place_;
  facts.master = master_;
  facts.restart_count = state_.restart_count;
  facts.terminal = terminal_->worker_terminal();
  std::vector<WorkerSpec> specs = workers_.specs(facts);
  // Which worker reads ddprun's stdin (global rank 0) is known once the ranks are: each interpreter
  // gets it when one might, and /dev/null at "go" when its worker does not.
  for (WorkerSpec& spec : specs) spec.reads_stdin = plan_.config.stdin_target != StdinTarget::none;
  return specs;
}

void Agent::start_observers() {
  const LaunchConfig& config = plan_.config;
  stacks_ = std::make_unique<NodeStacks>(io_, *logs_, place_);
  board_ = std::make_unique<BoardLink>(io_, config.rendezvous.run_id, place_, *status_, *stacks_);
  HangWatch::Callbacks on_hang;
  on_hang.on_hang = [this](double idle, double timeout) { dispatch(event::HangDetected{idle, timeout}); };
  on_hang.on_captured = [this] { dispatch(event::StacksCaptured{}); };
  hang_ = std::make_unique<HangWatch>(HangWatchSettings{config.hang_timeout_s, config.hang_action, plan_.hostname}, place_,
                                      *logs_, *events_, *status_, *stacks_, *board_, std::move(on_hang));
  status_->add_listener([this](const NodeStatus& node) { hang_->on_sample(node); });
  status_->add_listener([this](const NodeStatus& node) { board_->on_sample(node); });
  StatusServiceSettings service;
  service.run_id = config.rdzv_id;
  service.host = plan_.hostname;
  service.command = run_command_line(config.program, config.program_args);
  service.token = config.store_token;
  service.status_host = config.status_host;
  service.status_port = config.status_port;
  endpoint_ = std::make_unique<StatusService>(io_, std::move(service), plan_.env, *logs_, place_, *status_, *events_,
                                              *stacks_, *board_);
  endpoint_->start();
}

void Agent::print_failure_summary() {
  const std::vector<WorkerFailure>& failures = failure_record_.failures();
  if (!failures.empty() || state_.hang.empty()) write_stderr(format_failure_summary(plan_.config.program, failures));
  if (state_.hang.empty()) return;
  HangReport report;
  report.program = plan_.config.program;
  report.hang = state_.hang;
  report.action = state_.hang_action;
  hang_->fill(report);
  write_stderr(format_hang_summary(report));
}

void Agent::start_store() {
  const LaunchConfig& config = plan_.config;
  master_.host = config.standalone ? "127.0.0.1" : config.master_addr;
  // Bound here, so that a busy port is an error naming it, then handed to the store as it is:
  // the port is held from now until the job ends, with no release-and-rebind race.
  PortReservation reservation(io_, master_.host, config.standalone ? 0 : config.master_port);
  master_.port = reservation.port();
  place_.world_size = config.topology.nproc_per_node;  // one node: ranks 0..nproc-1
  rendezvous::StoreServerOptions options;
  options.host = master_.host;
  options.port = master_.port;
  options.token = config.store_token;
  rendezvous::raise_open_file_limit();  // one connection per worker, and per worker thread in some trainers
  try {
    store_ = std::make_unique<rendezvous::StoreServer>(options, reservation.take_socket());
  } catch (const rendezvous::Error& error) {
    throw LaunchError("cannot serve the store on " + rendezvous::format_endpoint(master_.host, master_.port) +
                      ": " + error.what());
  }
  store_->start();
}

void Agent::start_attempt() {
  if (!plan_.config.topology.multi_node) place_.attempt = state_.restart_count;
  place_.restarts = state_.restart_count;
  std::optional<std::pair<int, int>> first_failure;  // the last attempt's, before they are cleared
  if (const auto& failures = failure_record_.failures(); !failures.empty()) {
    first_failure = {failures.front().rank, failures.front().exitcode};
  }
  events_->group_starting(first_failure);

  AttemptFacts facts;
  facts.place = place_;
  facts.master = master_;
  // Workers that share the agent store across rounds number their attempt by the round (NodeRounds).
  facts.restart_count = rounds_ && rounds_->attempt_is_round() ? place_.attempt : state_.restart_count;
  facts.terminal = terminal_->worker_terminal();
  std::vector<WorkerSpec> specs = workers_.specs(facts);
  GpuSight sight = gpu_sight_of(specs, plan_.env);
  status_->set_gpus(gpu_sampler_.get(), sight);
  failure_record_.begin_attempt(specs.size());
  workers_.begin_attempt(*logs_, place_.attempt);

  // A fresh key space per attempt: a restarted worker must never read the previous attempt's keys
  // (PyTorch 2.x workers do not prefix them by attempt, as 1.13's did).
  if (store_ && !rounds_ && state_.restart_count > 0) store_->clear();  // multi-node: a fresh worker store per round
  failure_record_.count_oom_kills_from_now();
  WorkerGroupHandlers handlers;
  handlers.on_exit = [this](const WorkerExit& exit) {
    status_->worker_exited(exit.local_rank, exit.exitcode, exit.stop_signal_sent != 0 || exit.kill_sent);
    on_worker_exit(exit);
  };
  handlers.on_done = [this] {
    gpu_gate_->cancel();  // a start given up before the gate answered: its answer is not wanted
    // The next start waits for these processes' GPU memory (the monitor saw the workers' children too).
    previous_pids_ = std::exchange(attempt_pids_, {});
    if (StatusMonitor* monitor = status_->monitor()) monitor->pids_seen(previous_pids_);
    // The group's own handler is on the stack: let it go once this event is over.
    asio::post(io_, [retired = std::move(group_)] {});
    status_->attempt_ended();
    workers_.close_attempt_files();
    dispatch(event::GroupDone{});
  };
  handlers.on_start_failed = [this](const std::string& message) { dispatch(event::StartFailed{message}); };
  handlers.on_log_error = [this](const LogWriteError& error) { print_line(failure_record_.log_error(error)); };
  handlers.on_spawned = [this](pid_t pgid) {
    attempt_pids_.push_back(pgid);
    if (guardian_) guardian_->watch(pgid);
    if (auto started = workers_.started(pgid)) {
      events_->worker_started(started->local_rank, pgid, pgid == last_warm_pid_);
      if (started->verbose_line) print_line(*started->verbose_line);
    }
  };
  handlers.on_stdin = [this](pid_t pid, int fd, bool pty) { terminal_->add_stdin_target(pid, fd, pty); };
  handlers.on_pty_unavailable = [this](const std::string& reason) { terminal_->pty_unavailable(reason); };
  SpawnSettings spawn_settings;
  spawn_settings.cgroup_fd = cgroup_ ? cgroup_->dir_fd() : -1;
  spawn_settings.window = terminal_window();
  WorkerSpawner spawner;  // none: spawn_worker
  if (warm_) {
    spawner = [this](const WorkerSpec& spec, const Environ& env, const SpawnSettings& settings) {
      last_warm_pid_ = 0;
      if (auto warm = warm_->take(spec, env, settings.window)) {
        last_warm_pid_ = warm->pid;
        return std::move(*warm);
      }
      return spawn_worker(spec, env, settings);
    };
  }
  group_ = std::make_unique<WorkerGroup>(io_, std::move(handlers), plan_.env, spawn_settings, std::move(spawner));
  status_->attempt_started();
  // Each worker's folder, environment and log files are made as it is started, a batch per loop
  // turn, so that thousands of them never hold up a signal or an exit.
  const std::size_t count = specs.size();
  if (plan_.config.verbose) {
    print_line(describe_attempt_start(place_.attempt, state_.restart_count, plan_.config.max_restarts, static_cast<int>(count)));
  }
  // The next attempt's interpreters, if one may come: warmed once this attempt's are past their
  // preload (after the start below has handed them over).
  const auto& topology = plan_.config.topology;
  std::optional<std::vector<WorkerSpec>> to_warm;
  if (warm_ && (state_.restart_count < plan_.config.max_restarts || topology.min_nodes != topology.max_nodes)) {
    to_warm = specs_to_warm();
  }
  // The GPU gate first: an unhealthy GPU refuses the start, a restart waits for the stopped workers'
  // GPU memory (devices/gpu_gate.hpp). The next interpreters are warmed once the gate has let the
  // first workers take the waiting ones (warm_next before that would warm the set in their place).
  auto gate = [this, sight = std::move(sight), to_warm = std::move(to_warm)](std::function<void(bool)> go) {
    gpu_gate_->check(sight, std::exchange(previous_pids_, {}),
                     [this, go, to_warm](std::optional<std::string> refused) {
                       if (refused) dispatch(event::StartFailed{*refused, true});
                       go(!refused);
                       if (!refused && to_warm && warm_) warm_->warm_next(*to_warm);
                     });
  };
  group_->start(count, [this, specs = std::move(specs)](std::size_t i) {
    PreparedWorker worker{specs[i], {}};
    auto dir = logs_->worker_dir(place_.attempt, worker.spec.local_rank);
    worker.spec.error_file = (dir / "error.json").string();
    worker.spec.progress_file = (dir / "progress").string();
    if (auto hooks = stacks_->python_hooks(dir)) {
      worker.spec.python_dir = hooks->python_dir;
      worker.spec.python_stacks_file = hooks->python_stacks_file;
      worker.spec.stacks_signal = hooks->stacks_signal;
    }
    failure_record_.set_error_file(worker.spec.local_rank, worker.spec.error_file);
    worker.routes = workers_.open_routes(worker.spec.local_rank, place_.rank_base + worker.spec.local_rank, dir, *console_);
    workers_.preparing(worker.spec);
    return worker;
  }, std::move(gate));
}

void Agent::wait_child_exits() {
  child_exits_.async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;
    // One SIGCHLD may stand for many exits. Failures reaped together all happened before we
    // reacted, so all of them are reported, and the group is stopped once after the batch.
    reap_exited_children([this](pid_t pid, int status) {
      if (!(group_ && group_->on_child_exit(pid, status)) && warm_) warm_->on_child_exit(pid, status);
    });
    dispatch(event::ReapBatchDone{});
    wait_child_exits();
  });
}

void Agent::on_worker_exit(const WorkerExit& exit) {
  if (guardian_) guardian_->forget(exit.pid);
  terminal_->remove_stdin_target(exit.pid);
  events_->worker_exited({exit.local_rank, exit.pid, exit.exitcode, exit.stop_signal_sent,
                          failed_on_its_own(exit.exitcode, exit.stop_signal_sent, exit.kill_sent)});
  dispatch(event::WorkerExited{exit, place_.rank_base + exit.local_rank});
}

void Agent::wait_stop_signals() {
  stop_signals_.async_wait([this](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    dispatch(event::StopSignal{signo});
    wait_stop_signals();
  });
}

void Agent::on_forwarded_signal(const SignalOrigin& origin) {
  const auto& forwarded = plan_.config.signals_to_forward;
  if (std::find(forwarded.begin(), forwarded.end(), origin.signo) == forwarded.end()) {
    if (plan_.config.verbose) print_line(signal_name(origin.signo) + " not passed on (not in --forward-signals)");
    return;
  }
  std::string sender = sent_by_a_process(origin) ? process_name(origin.sender) : std::string();
  // Workers outside a job cgroup of ddprun's own share ddprun's cgroup, the one Slurm signals;
  // on cgroup v1 Slurm tracks the step's freezer cgroup, which the workers inherit in any case.
  const bool slurm_reaches_workers = cgroup_ == nullptr || in_slurm_v1_step(own_cgroups());
  if (decide_forward(origin, sender, slurm_reaches_workers) == ForwardVerdict::sender_signals_workers_too) {
    if (plan_.config.verbose) {
      print_line(signal_name(origin.signo) + " from slurmstepd (pid " + std::to_string(origin.sender) +
                 ") not passed on: Slurm signals the workers too");
    }
    return;
  }
  if (plan_.config.verbose) {
    std::string from = sender.empty() ? "" : " from " + sender + " (pid " + std::to_string(origin.sender) + ")";
    print_line(signal_name(origin.signo) + from + " passed on to the workers");
  }
  if (group_) group_->signal_running(origin.signo);
}

void Agent::finish(bool impatient) {
  if (warm_) warm_->stop();  // no interpreter is started for a job that ends
  events_->job_finished(state_.exit_status, state_.restart_count);
  if (auto warning = failure_record_.incomplete_logs_warning()) print_line(*warning);
  board_->close();  // its store connection too: the store's host waits for its clients to leave
  status_->end();   // the block off the terminal, so that the last lines end the screen
  // The last lines (a summary, the workers' last output) go out before ddprun exits, as all of
  // them do: a paused pager gets them when it resumes. The wait never blocks the loop, so a signal
  // ends it: then the user wants ddprun gone, and a stalled console gets a moment only.
  console_->when_drained([this] {
    // The job's last events reach a slow reader of --events too, if it takes them soon.
    events_->when_drained([this] { io_.stop(); }, std::chrono::seconds(2));
  });
  if (impatient) give_up_on_a_stalled_console();
}

void Agent::give_up_on_a_stalled_console() {
  constexpr auto kStalled = std::chrono::milliseconds(200);
  if (console_->out().stalled_for() >= kStalled || console_->err().stalled_for() >= kStalled) return io_.stop();
  finish_timer_.expires_after(kStalled);
  finish_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) give_up_on_a_stalled_console();  // still taking lines: they are worth the wait
  });
}

}  // namespace ddprun::launcher
