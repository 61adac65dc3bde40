/// test_worker: the worker program of the launcher's integration tests. One binary, one behaviour
/// per first argument, so each test says in its command line what its workers do.
///
///   env DIR                  write this worker's environment to DIR/env_<RANK>, exit 0
///   fail RANK CODE           rank RANK exits with CODE after 100 ms; the others sleep until stopped
///   raise RANK SIGNO         rank RANK raises SIGNO after 100 ms; the others sleep until stopped
///   error-file RANK          rank RANK writes TORCHELASTIC_ERROR_FILE (torchrun's format), exits 1
///   stderr-fail RANK         rank RANK prints 30 numbered lines to stderr, exits 3
///   pid DIR [ignore-stop]    write DIR/pid_<RANK>, then sleep until stopped (optionally ignoring
///                            SIGTERM, SIGINT, SIGHUP and SIGQUIT: only SIGKILL ends it)
///   restart DIR FAILRANK     attempt 0: FAILRANK exits 1; later attempts: write DIR/restart_<RANK>_<n>, exit 0
///   flood LINES              print LINES lines, each written in two pieces to provoke tearing
///   signals DIR              record each SIGUSR1/SIGUSR2 received in DIR/usr_<RANK>; exit 0 on SIGTERM
///   hog RANK                 rank RANK allocates and touches memory until something kills it
///   echo ARGS...             print the arguments, one a line
///   fail-together EPOCH_MS   ignore stop signals, sleep until EPOCH_MS (wall clock), then fail in
///                            the rank's own way: 0 exit 20, 1 exit 21, 2 SIGKILL, 3 SIGSEGV
///   ticks N MS               a C++ trainer: printf "tick i" N times, MS ms apart, never fflush
///                            (block-buffered on a pipe, line-buffered on a terminal)
///   isatty                   print "isatty 0=X 1=Y 2=Z" for stdin, stdout and stderr (1 = a terminal),
///                            then "size ROWSxCOLS" of the terminal on stdout when it is one
///   bar N MS                 rank 0: a tqdm-like bar, "\rbar i/N" N times MS ms apart, then "\n";
///                            the other ranks: "line i\n" at the same pace
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>

extern char** environ;

namespace {

int env_int(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : -1;
}

void sleep_until_stopped() {
  for (;;) ::pause();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path + ".tmp");
  out << text;
  out.close();
  std::rename((path + ".tmp").c_str(), path.c_str());  // readers never see half a file
}

void write_raw(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) std::_Exit(90);
    done += static_cast<std::size_t>(n);
  }
}

volatile sig_atomic_t g_usr1 = 0;
volatile sig_atomic_t g_usr2 = 0;
volatile sig_atomic_t g_term = 0;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 64;
  std::string mode = argv[1];
  int rank = env_int("RANK");
  std::string rank_text = std::to_string(rank);

  if (mode == "env" && argc == 3) {
    std::string text;
    for (char** e = environ; *e != nullptr; ++e) text += std::string(*e) + "\n";
    write_file(std::string(argv[2]) + "/env_" + rank_text, text);
    return 0;
  }
  if ((mode == "fail" || mode == "raise") && argc == 4) {
    if (rank != std::atoi(argv[2])) sleep_until_stopped();
    ::usleep(100 * 1000);
    if (mode == "raise") {
      ::signal(std::atoi(argv[3]), SIG_DFL);
      ::raise(std::atoi(argv[3]));
    }
    return std::atoi(argv[3]);
  }
  if (mode == "error-file" && argc == 3) {
    if (rank != std::atoi(argv[2])) sleep_until_stopped();
    const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
    if (path == nullptr) return 65;
    write_file(path,
               R"({"message": {"message": "ValueError: the loss became NaN", "extraInfo": )"
               R"({"py_callstack": "Traceback (most recent call last):\n  File \"train.py\", line 7, in <module>\nValueError: the loss became NaN\n", "timestamp": "1700000000"}}})");
    return 1;
  }
  if (mode == "stderr-fail" && argc == 3) {
    if (rank != std::atoi(argv[2])) sleep_until_stopped();
    for (int i = 1; i <= 30; ++i) std::fprintf(stderr, "diagnostic line %d\n", i);
    return 3;
  }
  if (mode == "fail-together" && argc == 3) {
    for (int signo : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) ::signal(signo, SIG_IGN);
    long long at_ms = std::atoll(argv[2]);
    timespec when{static_cast<time_t>(at_ms / 1000), static_cast<long>(at_ms % 1000) * 1000000L};
    while (::clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &when, nullptr) != 0) {
    }
    switch (rank) {
      case 0: return 20;
      case 1: return 21;
      case 2: ::raise(SIGKILL); return 0;
      default: ::signal(SIGSEGV, SIG_DFL); ::raise(SIGSEGV); return 0;
    }
  }
  if (mode == "pid" && argc >= 3) {
    if (argc == 4 && std::strcmp(argv[3], "ignore-stop") == 0) {
      for (int signo : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) ::signal(signo, SIG_IGN);
    }
    write_file(std::string(argv[2]) + "/pid_" + rank_text, std::to_string(::getpid()));
    sleep_until_stopped();
  }
  if (mode == "restart" && argc == 4) {
    int attempt = env_int("TORCHELASTIC_RESTART_COUNT");
    if (attempt == 0) {
      if (rank == std::atoi(argv[3])) {
        ::usleep(100 * 1000);
        return 1;
      }
      sleep_until_stopped();
    }
    write_file(std::string(argv[2]) + "/restart_" + rank_text + "_" + std::to_string(attempt), "ok");
    return 0;
  }
  if (mode == "flood" && argc == 3) {
    int lines = std::atoi(argv[2]);
    std::string payload(100 + rank * 7, static_cast<char>('a' + rank % 26));
    for (int i = 0; i < lines; ++i) {
      std::string line = "rank=" + rank_text + " i=" + std::to_string(i) + " " + payload + " end\n";
      std::size_t half = line.size() / 2;
      write_raw(STDOUT_FILENO, line.substr(0, half));
      write_raw(STDOUT_FILENO, line.substr(half));
    }
    return 0;
  }
  if (mode == "signals" && argc == 3) {
    struct sigaction sa{};
    sa.sa_handler = [](int signo) {
      if (signo == SIGUSR1) g_usr1 = g_usr1 + 1;
      if (signo == SIGUSR2) g_usr2 = g_usr2 + 1;
      if (signo == SIGTERM) g_term = 1;
    };
    ::sigaction(SIGUSR1, &sa, nullptr);
    ::sigaction(SIGUSR2, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    // Blocked until sigsuspend, which unblocks and waits in one step: a signal that arrives before
    // the worker waits is delivered then, never lost in the gap (as it could be with pause()).
    sigset_t handled;
    sigset_t none;
    ::sigemptyset(&handled);
    ::sigemptyset(&none);
    for (int signo : {SIGUSR1, SIGUSR2, SIGTERM}) ::sigaddset(&handled, signo);
    ::sigprocmask(SIG_BLOCK, &handled, nullptr);
    write_file(std::string(argv[2]) + "/ready_" + rank_text, "ready");
    while (g_term == 0) {
      ::sigsuspend(&none);
      write_file(std::string(argv[2]) + "/usr_" + rank_text,
                 std::to_string(g_usr1) + " " + std::to_string(g_usr2));
    }
    return 0;
  }
  if (mode == "hog" && argc == 3) {
    if (rank != std::atoi(argv[2])) sleep_until_stopped();
    constexpr std::size_t kChunk = 16 << 20;
    for (std::size_t total = 0; total < (std::size_t{64} << 30); total += kChunk) {
      auto* block = static_cast<char*>(std::malloc(kChunk));
      if (block == nullptr) return 70;
      std::memset(block, 1, kChunk);  // touch every page: only resident memory counts
    }
    return 71;
  }
  if (mode == "ticks" && argc == 4) {
    for (int i = 1; i <= std::atoi(argv[2]); ++i) {
      std::printf("tick %d\n", i);
      ::usleep(static_cast<useconds_t>(std::atoi(argv[3])) * 1000);
    }
    return 0;
  }
  if (mode == "isatty") {
    std::printf("isatty 0=%d 1=%d 2=%d\n", ::isatty(0), ::isatty(1), ::isatty(2));
    winsize size{};
    if (::ioctl(1, TIOCGWINSZ, &size) == 0) std::printf("size %dx%d\n", size.ws_row, size.ws_col);
    return 0;
  }
  if (mode == "bar" && argc == 4) {
    const int steps = std::atoi(argv[2]);
    for (int i = 1; i <= steps; ++i) {
      if (rank == 0) {
        std::printf("\rbar %d/%d", i, steps);
      } else {
        std::printf("line %d\n", i);
      }
      std::fflush(stdout);
      ::usleep(static_cast<useconds_t>(std::atoi(argv[3])) * 1000);
    }
    if (rank == 0) std::printf("\n");
    return 0;
  }
  if (mode == "echo") {
    for (int i = 2; i < argc; ++i) std::printf("%s\n", argv[i]);
    return 0;
  }
  return 64;
}
