#pragma once
/// StatusEndpoint: what an agent holds while it serves its status (agent_endpoint.cpp): the view of
/// the agent the server reads, the server (the run's Unix socket, and TCP with --status-port) and
/// the run's entry in the registry. Members go in the reverse order: the entry first (no reader is
/// sent to a closing socket), then the server (its connections, its socket file), then the view.
#include <memory>

#include "launcher/observe/run_registry.hpp"
#include "launcher/observe/status_http.hpp"

namespace ddprun::launcher {

struct StatusEndpoint {
  std::unique_ptr<StatusSource> view;
  std::unique_ptr<StatusHttpServer> server;
  std::unique_ptr<RunRegistration> registration;
};

}  // namespace ddprun::launcher
