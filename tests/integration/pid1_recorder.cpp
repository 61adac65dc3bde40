/// pid1_recorder REPORT CMD ARGS...: the init process of a PID namespace made for one test
/// (`unshare -p -f --mount-proc pid1_recorder ...`). It records every signal sent to it (a launcher
/// that signals "pid -1" or "group 1" reaches exactly this process), runs CMD, reaps everything as
/// init must, and once CMD has exited lists the processes still alive in the namespace. It writes
///   signals: <signo from pid>,...
///   leftovers: <pid comm>,...
/// to REPORT, kills the leftovers, and exits with CMD's status (128+N when CMD died of signal N).
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kMaxRecords = 256;
volatile sig_atomic_t g_count = 0;
int g_signo[kMaxRecords];
pid_t g_sender[kMaxRecords];

void record(int signo, siginfo_t* info, void*) {
  int i = g_count;
  if (i >= kMaxRecords) return;
  g_signo[i] = signo;
  g_sender[i] = info != nullptr ? info->si_pid : 0;
  g_count = i + 1;
}

std::vector<pid_t> other_processes() {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (*entry->d_name != '\0' && *end == '\0' && pid > 1) pids.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return pids;
}

std::string comm_of(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(file, name);
  return name;
}

void reap_all() {
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 64;
  struct sigaction action {};
  action.sa_sigaction = record;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  ::sigemptyset(&action.sa_mask);
  for (int signo = 1; signo < NSIG; ++signo) {
    if (signo == SIGKILL || signo == SIGSTOP || signo == SIGCHLD) continue;
    ::sigaction(signo, &action, nullptr);
  }
  pid_t command = ::fork();
  if (command == 0) {
    struct sigaction plain {};
    plain.sa_handler = SIG_DFL;
    for (int signo = 1; signo < NSIG; ++signo) ::sigaction(signo, &plain, nullptr);
    ::execvp(argv[2], argv + 2);
    ::_exit(127);
  }
  int status = 0;
  while (true) {
    int child_status = 0;
    pid_t pid = ::waitpid(-1, &child_status, 0);
    if (pid == command) {
      status = child_status;
      break;
    }
    if (pid < 0 && errno != EINTR) break;
  }
  // What the command left: give dying processes a moment, then list what is still there.
  std::vector<pid_t> left;
  for (int i = 0; i < 100; ++i) {
    reap_all();
    left = other_processes();
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::ofstream report(argv[1]);
  report << "signals:";
  for (int i = 0; i < g_count; ++i) report << (i ? "," : " ") << g_signo[i] << " from " << g_sender[i];
  report << "\nleftovers:";
  for (std::size_t i = 0; i < left.size(); ++i) report << (i ? "," : " ") << left[i] << " " << comm_of(left[i]);
  report << "\n";
  report.close();
  for (pid_t pid : left) ::kill(pid, SIGKILL);
  reap_all();
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
