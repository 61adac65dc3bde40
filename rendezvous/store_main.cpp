/// ddprun-store: serve a TCPStore-compatible store on its own, for jobs whose store should outlive
/// any one agent, or for PyTorch programs that want a sturdier server. Stops gracefully on
/// SIGTERM/SIGINT: waiting clients see their connection end at once.
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "common/environment.hpp"
#include "common/token_file.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/endpoint.hpp"
#include "rendezvous/open_file_limit.hpp"
#include "rendezvous/store_error.hpp"
#include "rendezvous/store_server.hpp"

using namespace ddprun::rendezvous;

namespace {

int usage_error(const std::string& message) {
  std::cerr << "ddprun-store: error: " << message << " (see ddprun-store --help)" << std::endl;
  return 2;
}

/// Large buffers (values, replies, a large request as it arrives) go back to the kernel when freed,
/// so that the store's memory follows what its connections hold now (each within its budget, see
/// connection_budget.hpp) rather than the most they ever held. Setting the threshold also stops
/// glibc from raising it after each free, which is what kept freed megabytes resident.
void return_large_buffers_to_the_kernel() { ::mallopt(M_MMAP_THRESHOLD, 1 << 20); }

/// Blocks the stop signals in every thread, so that this thread alone takes them with sigwait.
sigset_t block_stop_signals() {
  sigset_t signals;
  ::sigemptyset(&signals);
  for (int signo : {SIGTERM, SIGINT, SIGHUP}) ::sigaddset(&signals, signo);
  ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ddprun-store: a PyTorch TCPStore-compatible key-value store (both wire dialects)"};
  StoreServerOptions options;
  std::string port_file;
  std::string token_file;
  app.add_option("--host", options.host, "address to bind (default: all IPv4 interfaces)")->capture_default_str();
  app.add_option("--port", options.port, "port to listen on; 0 picks a free one")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--port-file", port_file, "write the bound port to this file once listening");
  app.add_option("--token-file", token_file,
                 "require clients to prove they know the token in this file (else DDPRUN_STORE_TOKEN, "
                 "DDPRUN_STORE_TOKEN_FILE; PyTorch clients cannot)");
  app.add_option("--max-connections", options.max_connections, "connections served at once")->capture_default_str();
  app.add_option("--max-key-bytes", options.limits.max_key_bytes, "longest key")->capture_default_str();
  app.add_option("--max-value-bytes", options.limits.max_value_bytes, "largest value")->capture_default_str();
  app.add_option("--max-keys-per-request", options.limits.max_keys_per_request,
                 "keys in one CHECK/WAIT/MULTI_GET/MULTI_SET")
      ->capture_default_str();
  app.add_option("--max-request-bytes", options.limits.max_request_bytes, "largest request, all fields together")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& error) {
    return usage_error(error.what());
  }

  sigset_t stop_signals = block_stop_signals();
  try {
    if (!token_file.empty()) {
      // Read as DDPRUN_STORE_TOKEN_FILE is, so that clients given the same file hold the same token.
      ddprun::common::TokenFile file = ddprun::common::read_token_file(token_file);
      if (!file.error.empty()) return usage_error("--token-file: cannot read " + token_file);
      if (file.token.empty()) return usage_error("--token-file: " + token_file + " holds no token");
      options.token = file.token;
    } else {
      options.token = auth::token_from_environment(ddprun::common::getenv_value);
    }
    raise_open_file_limit();
    return_large_buffers_to_the_kernel();
    StoreServer server(options);
    server.start();
    if (!port_file.empty()) {
      // Written whole, then renamed: a reader polling for the file never sees half a number.
      std::string tmp = port_file + ".tmp";
      std::ofstream(tmp) << server.port() << "\n";
      std::rename(tmp.c_str(), port_file.c_str());
    }
    std::cerr << "ddprun-store: serving on " << format_endpoint(options.host, server.port())
              << (options.token ? " (authentication required)" : "") << std::endl;
    int signo = 0;
    ::sigwait(&stop_signals, &signo);
    server.stop();
    return 0;
  } catch (const StoreError& error) {
    std::cerr << "ddprun-store: " << error.what() << std::endl;
    return 1;
  }
}
