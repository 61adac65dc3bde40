#include "launcher/agent.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <utility>

#include "launcher/agent_support.hpp"
#include "launcher/output/console.hpp"
#include "launcher/workers/elf_needed.hpp"
#include "launcher/report/error_file.hpp"
#include "launcher/base/errors.hpp"
#include "launcher/report/failure_rule.hpp"
#include "launcher/forward_rule.hpp"
#include "launcher/workers/guardian.hpp"
#include "launcher/workers/job_cgroup.hpp"
#include "launcher/devices/numa_plan.hpp"
#include "launcher/output_plan.hpp"
#include "launcher/workers/reaper.hpp"
#include "launcher/fleet/session_watch.hpp"
#include "launcher/base/signal_names.hpp"
#include "launcher/observe/board_link.hpp"
#include "launcher/observe/event_recorder.hpp"
#include "launcher/observe/hang_summary.hpp"
#include "launcher/observe/hang_watch.hpp"
#include "launcher/observe/node_stacks.hpp"
#include "launcher/observe/status_service.hpp"
#include "launcher/observe/status_watch.hpp"
#include "launcher/terminal/stdin_forwarder.hpp"
#include "launcher/terminal/terminal_window.hpp"
#include "launcher/cli/verbose.hpp"
#include "launcher/workers/worker_env.hpp"
#include "launcher/workers/worker_group.hpp"
#include "rendezvous/endpoint.hpp"
#include "rendezvous/node_membership.hpp"
#include "rendezvous/open_file_limit.hpp"
#include "rendezvous/error.hpp"
#include "rendezvous/store_server.hpp"

namespace asio = boost::asio;

namespace ddprun::launcher {
namespace {

UniqueFd open_log_file(const std::filesystem::path& path) {
  // Non-blocking: a FIFO left at the path would otherwise block the loop in open() until a reader came.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0644);
  if (fd < 0) throw LaunchError("cannot open log file " + path.string() + ": " + std::strerror(errno));
  UniqueFd file(fd);
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    throw LaunchError("cannot use log file " + path.string() + ": it is not a regular file");
  }
  return file;
}

}  // namespace

Agent::Agent(AgentPlan plan)
    : plan_(std::move(plan)),
      finish_timer_(io_),
      child_exits_(io_, SIGCHLD),
      stop_signals_(io_),
      oom_(OomWatch::for_this_process()) {
  state_.multi_node = plan_.config.topology.multi_node;
  state_.max_restarts = plan_.config.max_restarts;
  state_.hang_action = plan_.config.hang_action;
  // Read once per job (a few small reads of the program's ELF headers, docs/performance.md).
  libtorch_1_ = links_libtorch_1(elf_needed(plan_.command.executable));
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
    void operator()(const action::StopGroup& s) const { a.group_->stop(s.signo, grace_of(a.plan_.config)); }
    void operator()(const action::KillGroup&) const { a.group_->stop(SIGKILL, std::chrono::milliseconds(0)); }
    void operator()(const action::KillRunning&) const { a.group_->signal_running(SIGKILL); }
    void operator()(const action::RecordFailure& r) const { a.failures_.push_back(a.describe_failure(r.exit)); }
    void operator()(const action::ReportFailure& r) const { a.membership_->report_failure(r.end); }
    void operator()(const action::MarkFinished&) const { a.membership_->mark_finished(); }
    void operator()(const action::JoinRound&) const { a.begin_join(); }
    void operator()(const action::EnterRound& e) const { a.enter_round(e.decision); }
    void operator()(const action::CloseRound&) const { a.close_round(); }
    void operator()(const action::Leave& l) const { a.leave(l.end); }
    void operator()(const action::LingerStore&) const { a.linger_store_ = true; }
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
  set_up_terminals();
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
  if (config.verbose) print_launch_config();

  if (defaults_omp_num_threads(plan_.env, config.topology.nproc_per_node)) print_line(std::string("warning: ") + kOmpWarning);
  for (const auto& notice : config.notices) print_line("note: " + notice);
  if (config.numa_binding) plan_numa_binding();

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
  membership_.reset();  // its connections close before the stores they may be talking to
  io_.restart();
  io_.poll();  // what the membership's cancelled operations left to run
  if (worker_store_) worker_store_->stop();
  // The job ended on every node: the others may still be reading that end from our store.
  if (store_ && linger_store_) store_->wait_until_idle(close_timeout_);
  if (store_) store_->stop();
  if (state_.exit_status == kExitSuccess) logs_->remove_if_temporary();
  return state_.exit_status;
}

void Agent::clean_up() {
  endpoint_.reset();  // its socket and registry entry go with the job
  kill_remaining_children(guardian_ ? guardian_->pid() : 0);
  cgroup_.reset();  // what left our tree for good (under another subreaper) is still in the cgroup
  stdin_.reset();   // ddprun's terminal back in its own mode, whatever the way out
  // The guardian stays until ddprun exits, and then has nothing to do.
  if (guardian_) guardian_->mark_clean();
  console_.reset();  // ddprun's last lines (after run) are written directly
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
  if (!failures_.empty() || state_.hang.empty()) write_stderr(format_failure_summary(plan_.config.program, failures_));
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
  master_addr_ = config.standalone ? "127.0.0.1" : config.master_addr;
  // Bound here, so that a busy port is an error naming it, then handed to the store as it is:
  // the port is held from now until the job ends, with no release-and-rebind race.
  PortReservation reservation(io_, master_addr_, config.standalone ? 0 : config.master_port);
  master_port_number_ = reservation.port();
  place_.world_size = config.topology.nproc_per_node;  // one node: ranks 0..nproc-1
  rendezvous::StoreServerOptions options;
  options.host = master_addr_;
  options.port = master_port_number_;
  options.token = config.store_token;
  rendezvous::raise_open_file_limit();  // one connection per worker, and per worker thread in some trainers
  try {
    store_ = std::make_unique<rendezvous::StoreServer>(options, reservation.take_socket());
  } catch (const rendezvous::Error& error) {
    throw LaunchError("cannot serve the store on " + rendezvous::format_endpoint(master_addr_, master_port_number_) +
                      ": " + error.what());
  }
  store_->start();
}

void Agent::plan_numa_binding() {
  NumaBinding binding = launcher::plan_numa_binding(plan_.config, plan_.env);
  for (const auto& note : binding.notes) print_line("note: " + note);
  numa_cpus_.clear();
  for (const auto& cpus : binding.cpus) numa_cpus_.emplace_back(cpus ? std::vector<int>(cpus->begin(), cpus->end()) : std::vector<int>{});
  if (plan_.config.verbose) {
    for (std::size_t local_rank = 0; local_rank < binding.cpus.size(); ++local_rank) {
      if (binding.cpus[local_rank]) {
        print_line("--numa-binding: local rank " + std::to_string(local_rank) + " on CPUs " + format_cpu_list(*binding.cpus[local_rank]));
      }
    }
  }
}

std::vector<WorkerSpec> Agent::worker_specs() const {
  const LaunchConfig& config = plan_.config;
  std::vector<WorkerSpec> specs;
  for (int local_rank = 0; local_rank < config.topology.nproc_per_node; ++local_rank) {
    WorkerSpec spec;
    spec.local_rank = local_rank;
    spec.rank = place_.rank_base + local_rank;
    spec.local_world_size = config.topology.nproc_per_node;
    spec.world_size = place_.world_size;
    spec.group_rank = place_.group_rank;
    spec.group_world_size = place_.group_world_size;
    spec.role = config.role;
    spec.role_rank = spec.rank;
    spec.role_world_size = spec.world_size;
    spec.master_addr = master_addr_;
    spec.master_port = master_port_number_;
    spec.restart_count = attempt_is_round_ ? place_.attempt : state_.restart_count;
    spec.max_restarts = config.max_restarts;
    spec.run_id = config.rdzv_id;
    spec.use_agent_store = true;
    spec.signals_to_handle = signals_to_handle_value(config.signals_to_handle);
    spec.libtorch_1 = libtorch_1_;
    spec.cuda_visible_devices = config.devices.at(static_cast<std::size_t>(local_rank));
    spec.virtual_local_rank = config.virtual_local_rank;
    if (!numa_cpus_.empty()) spec.cpu_affinity = numa_cpus_.at(static_cast<std::size_t>(local_rank));
    spec.executable = plan_.command.executable;
    spec.argv = substitute_local_rank(plan_.command.argv, local_rank);
    spec.terminal = worker_terminal_;
    spec.reads_stdin = config.stdin_target == StdinTarget::all || (config.stdin_target == StdinTarget::rank0 && spec.rank == 0);
    specs.push_back(std::move(spec));
  }
  return specs;
}

WorkerRoutes Agent::open_routes(int local_rank, const std::filesystem::path& dir) {
  const LaunchConfig& config = plan_.config;
  WorkerOutputPlan output = plan_output(config, local_rank);
  const std::string& tmpl =
      config.log_line_prefix_template.empty() ? std::string(kDefaultPrefixTemplate) : config.log_line_prefix_template;
  auto route = [&](const StreamPlan& stream, ConsoleWriter& console, const char* file_name) {
    std::string prefix = expand_prefix(tmpl, config.role, place_.rank_base + local_rank, local_rank, plan_.hostname);
    if (use_color(plan_.env, console.fd())) prefix = colorize(prefix, local_rank);
    StreamRoute r;
    if (stream.to_console) {
      r.console = &console;
      if (stream.prefixed) r.prefix = prefix;
    }
    if (stream.to_file) {
      r.file_path = (dir / file_name).string();
      attempt_log_files_.push_back(open_log_file(r.file_path));
      r.file_fd = attempt_log_files_.back().get();
      // Should the file fail (a full disk), its lines go to the console, marked with their rank.
      r.fallback = &console;
      r.fallback_prefix = prefix;
    }
    return r;
  };
  WorkerRoutes routes{route(output.out, console_->out(), "stdout.log"), route(output.err, console_->err(), "stderr.log")};
  // --duplicate-std*-filters: torchrun's tee prefix ([role0]: or the template), as its TailLog writes it.
  auto filter = [&](StreamRoute& r, const StreamPlan& stream, int fd, const std::vector<std::string>& filters, const char* name) {
    if (!stream.to_filtered_file || fd < 0) return;
    r.filtered_fd = fd;
    r.filtered_path = (logs_->attempt_dir(place_.attempt) / name).string();
    r.filters = filters;
    r.filtered_prefix = expand_prefix(tmpl, config.role, place_.rank_base + local_rank, local_rank, plan_.hostname);
  };
  filter(routes.out, output.out, filtered_stdout_fd_, config.duplicate_stdout_filters, "filtered_stdout.log");
  filter(routes.err, output.err, filtered_stderr_fd_, config.duplicate_stderr_filters, "filtered_stderr.log");
  return routes;
}

void Agent::start_attempt() {
  if (!plan_.config.topology.multi_node) place_.attempt = state_.restart_count;
  place_.restarts = state_.restart_count;
  std::optional<std::pair<int, int>> first_failure;  // the last attempt's, before they are cleared
  if (!failures_.empty()) first_failure = {failures_.front().rank, failures_.front().exitcode};
  events_->group_starting(first_failure);
  failures_.clear();
  attempt_log_files_.clear();
  error_files_.clear();

  std::vector<WorkerSpec> specs = worker_specs();
  error_files_.assign(specs.size(), std::string());
  open_filtered_files();

  // A fresh key space per attempt: a restarted worker must never read the previous attempt's keys
  // (PyTorch 2.x workers do not prefix them by attempt, as 1.13's did).
  if (store_ && !membership_ && state_.restart_count > 0) store_->clear();  // multi-node: a fresh worker store per round
  oom_kills_seen_ = oom_.read_kills();
  WorkerGroupHandlers handlers;
  handlers.on_exit = [this](const WorkerExit& exit) {
    status_->worker_exited(exit.local_rank, exit.exitcode, exit.stop_signal_sent != 0 || exit.kill_sent);
    on_worker_exit(exit);
  };
  handlers.on_done = [this] {
    // The group's own handler is on the stack: let it go once this event is over.
    asio::post(io_, [retired = std::move(group_)] {});
    status_->attempt_ended();
    attempt_log_files_.clear();
    dispatch(event::GroupDone{});
  };
  handlers.on_start_failed = [this](const std::string& message) { dispatch(event::StartFailed{message}); };
  handlers.on_log_error = [this](const LogWriteError& error) { on_log_error(error); };
  handlers.on_spawned = [this](pid_t pgid) {
    if (guardian_) guardian_->watch(pgid);
    if (local_rank_starting_) events_->worker_started(*std::exchange(local_rank_starting_, std::nullopt), pgid);
    if (being_started_) {  // -v: the worker just prepared is the one started (WorkerGroup::spawn_batch)
      print_line(describe_worker_start(being_started_->local_rank, being_started_->rank, pgid, being_started_->argv));
      being_started_.reset();
    }
  };
  handlers.on_stdin = [this](pid_t pid, int fd, bool pty) {
    if (stdin_) return stdin_->add_target(pid, fd, pty);
    ::close(fd);
  };
  handlers.on_pty_unavailable = [this](const std::string& reason) {
    if (!std::exchange(pty_warned_, true)) print_line("warning: " + reason + "; workers write to pipes instead");
  };
  SpawnSettings spawn_settings;
  spawn_settings.cgroup_fd = cgroup_ ? cgroup_->dir_fd() : -1;
  spawn_settings.window = terminal_window();
  group_ = std::make_unique<WorkerGroup>(io_, std::move(handlers), plan_.env, spawn_settings);
  status_->attempt_started();
  // Each worker's folder, environment and log files are made as it is started, a batch per loop
  // turn, so that thousands of them never hold up a signal or an exit.
  const std::size_t count = specs.size();
  if (plan_.config.verbose) {
    print_line(describe_attempt_start(place_.attempt, state_.restart_count, plan_.config.max_restarts, static_cast<int>(count)));
  }
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
    error_files_.at(i) = worker.spec.error_file;
    local_rank_starting_ = worker.spec.local_rank;
    worker.routes = open_routes(worker.spec.local_rank, dir);
    if (plan_.config.verbose) being_started_ = worker.spec;
    return worker;
  });
}

void Agent::open_filtered_files() {
  // torchrun opens them whenever filters are given, whichever ranks are teed: an empty file says
  // that nothing matched, or that no rank's stream was teed.
  const LaunchConfig& config = plan_.config;
  filtered_stdout_fd_ = filtered_stderr_fd_ = -1;
  auto open = [&](const std::vector<std::string>& filters, const char* name) {
    if (filters.empty()) return -1;
    attempt_log_files_.push_back(open_log_file(logs_->attempt_dir(place_.attempt) / name));
    return attempt_log_files_.back().get();
  };
  filtered_stdout_fd_ = open(config.duplicate_stdout_filters, "filtered_stdout.log");
  filtered_stderr_fd_ = open(config.duplicate_stderr_filters, "filtered_stderr.log");
}

void Agent::on_log_error(const LogWriteError& error) {
  if (error.filtered) {
    print_line("warning: cannot write " + error.path + ": " + error.reason + "; local rank " +
               std::to_string(error.local_rank) + "'s matching lines are no longer copied there");
    log_errors_.push_back(error);
    return;
  }
  print_line("warning: cannot write " + error.path + ": " + error.reason + "; local rank " +
             std::to_string(error.local_rank) + "'s lines go to the console from now on");
  log_errors_.push_back(error);
}

void Agent::wait_child_exits() {
  child_exits_.async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;
    // One SIGCHLD may stand for many exits. Failures reaped together all happened before we
    // reacted, so all of them are reported, and the group is stopped once after the batch.
    reap_exited_children([this](pid_t pid, int status) {
      if (group_) group_->on_child_exit(pid, status);
    });
    dispatch(event::ReapBatchDone{});
    wait_child_exits();
  });
}

void Agent::on_worker_exit(const WorkerExit& exit) {
  if (guardian_) guardian_->forget(exit.pid);
  if (stdin_) stdin_->remove_target(exit.pid);
  events_->worker_exited({exit.local_rank, exit.pid, exit.exitcode, exit.stop_signal_sent,
                          failed_on_its_own(exit.exitcode, exit.stop_signal_sent, exit.kill_sent)});
  dispatch(event::WorkerExited{exit, place_.rank_base + exit.local_rank});
}

WorkerFailure Agent::describe_failure(const WorkerExit& exit) {
  WorkerFailure failure;
  failure.local_rank = exit.local_rank;
  failure.rank = place_.rank_base + exit.local_rank;
  failure.exitcode = exit.exitcode;
  failure.pid = exit.pid;
  failure.time = exit.time;
  failure.host = plan_.hostname;
  failure.error_file = error_files_.at(static_cast<std::size_t>(exit.local_rank));
  failure.error = read_error_file(failure.error_file);
  failure.stderr_tail = group_->stderr_tail_of(exit.local_rank);
  if (plan_.command.python) failure.python = describe_python(*plan_.command.python);
  if (exit.exitcode == -SIGKILL && oom_kills_seen_) {
    // The kernel counts the kill before it delivers SIGKILL, so the count is current by now.
    // Each counted kill explains one death only: a second SIGKILL (a user's kill -9) is not an OOM.
    auto now = oom_.read_kills();
    failure.oom_killed = now && *now > *oom_kills_seen_;
    if (failure.oom_killed) oom_kills_seen_ = *oom_kills_seen_ + 1;
  }
  return failure;
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
  events_->job_finished(state_.exit_status, state_.restart_count);
  if (!log_errors_.empty()) {
    const LogWriteError& first = log_errors_.front();
    print_line("warning: " + std::to_string(log_errors_.size()) + " log file(s) are incomplete (" + first.path +
               ": " + first.reason + "); their lines after the failure were shown on the console");
  }
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

void Agent::print_launch_config() const {
  LaunchFacts facts;
  facts.executable = plan_.command.executable;
  facts.argv = plan_.command.argv;
  if (plan_.command.python) facts.interpreter = describe_python(*plan_.command.python);
  facts.device_source = plan_.config.device_source;
  if (!plan_.config.topology.multi_node) facts.master = rendezvous::format_endpoint(master_addr_, master_port_number_);
  facts.log_dir = logs_->run_dir().string();
  for (const auto& line : describe_launch_config(plan_.config, facts)) print_line(line);
}

}  // namespace ddprun::launcher
