// report_failure: every error that can end ddprun -> its one line on stderr and its exit status,
// by table (the one place main turns failures into what the user sees).
#include "launcher/report/exit_status.hpp"

#include <gtest/gtest.h>

#include <boost/system/system_error.hpp>
#include <filesystem>
#include <new>
#include <stdexcept>
#include <system_error>

#include "launcher/base/errors.hpp"
#include "rendezvous/rendezvous_error.hpp"
#include "rendezvous/rendezvous_settings.hpp"
#include "rendezvous/store_error.hpp"

namespace ddprun::launcher {
namespace {

template <typename E, typename... Args>
std::exception_ptr failure(Args&&... args) {
  return std::make_exception_ptr(E(std::forward<Args>(args)...));
}

TEST(ReportFailure, EveryErrorHasItsLineAndStatus) {
  struct Row {
    std::string name;
    std::exception_ptr failure;
    std::string line;
    int status;
  };
  const std::error_code denied(EACCES, std::generic_category());
  const std::vector<Row> rows{
      {"usage", failure<UsageError>("--nnodes: \"0\" is not N"), "ddprun: error: --nnodes: \"0\" is not N (see ddprun --help)\n",
       kExitUsage},
      {"launch", failure<LaunchError>("port 29500 on 127.0.0.1 is in use"), "ddprun: port 29500 on 127.0.0.1 is in use\n",
       kExitJobFailed},
      {"store", failure<rendezvous::StoreError>("cannot bind 0.0.0.0:29400: Address in use"),
       "ddprun: cannot bind 0.0.0.0:29400: Address in use\n", kExitJobFailed},
      {"store timeout", failure<rendezvous::StoreTimeout>("GET k timed out"), "ddprun: GET k timed out\n",
       kExitJobFailed},
      {"rendezvous", failure<rendezvous::RendezvousError>("node 1 left"), "ddprun: node 1 left\n", kExitJobFailed},
      {"rendezvous closed", failure<rendezvous::RendezvousClosed>("the job ended"), "ddprun: the job ended\n",
       kExitJobFailed},
      {"rendezvous base", failure<rendezvous::Error>("no route to h"), "ddprun: no route to h\n", kExitJobFailed},
      {"filesystem", failure<std::filesystem::filesystem_error>("mkdir", std::filesystem::path("/x"), denied),
       "ddprun: filesystem error: mkdir: Permission denied [/x] (check that the folder exists, is writable and has "
       "room)\n",
       kExitJobFailed},
      {"asio", failure<boost::system::system_error>(boost::system::error_code(EMFILE, boost::system::generic_category()), "accept"),
       "ddprun: accept: Too many open files (a system resource ran out or was refused: check ulimit -a)\n",
       kExitJobFailed},
      {"system", failure<std::system_error>(denied, "open"),
       "ddprun: open: Permission denied (a system resource ran out or was refused: check ulimit -a)\n", kExitJobFailed},
      {"memory", failure<std::bad_alloc>(), "ddprun: out of memory\n", kExitJobFailed},
      {"other", failure<std::logic_error>("unreachable"), "ddprun: internal error: unreachable\n", kExitJobFailed},
      {"not std", std::make_exception_ptr(42),
       "ddprun: internal error: an exception that is not a std::exception\n", kExitJobFailed},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    ExitReport report = report_failure(row.failure);
    EXPECT_EQ(report.line, row.line);
    EXPECT_EQ(report.status, row.status);
  }
}

TEST(ReportFailure, EachLayerHasOneBase) {
  // What a caller catches to get every failure of a layer.
  EXPECT_TRUE((std::is_base_of_v<Error, UsageError>));
  EXPECT_TRUE((std::is_base_of_v<Error, LaunchError>));
  EXPECT_TRUE((std::is_base_of_v<rendezvous::Error, rendezvous::StoreError>));
  EXPECT_TRUE((std::is_base_of_v<rendezvous::Error, rendezvous::StoreTimeout>));
  EXPECT_TRUE((std::is_base_of_v<rendezvous::Error, rendezvous::RendezvousError>));
  EXPECT_TRUE((std::is_base_of_v<rendezvous::Error, rendezvous::RendezvousClosed>));
  EXPECT_TRUE((std::is_base_of_v<rendezvous::Error, rendezvous::SettingError>));
}

}  // namespace
}  // namespace ddprun::launcher
