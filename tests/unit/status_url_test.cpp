// status_url (launcher/observe/status_service.hpp), by table: the URL ddprun prints for
// --status-port and writes to the run registry. An address that means "every address" (0.0.0.0,
// ::) is no place a browser can go: the host's name stands in for it (issue 25).
#include <gtest/gtest.h>

#include <string>

#include "launcher/observe/status_service.hpp"

namespace ddprun::launcher {
namespace {

TEST(StatusUrl, AWildcardAddressBecomesTheHostsNameOtherAddressesStayAsGiven) {
  struct Row {
    std::string status_host;
    std::string host_name;
    std::string url;
  };
  const Row rows[] = {
      {"127.0.0.1", "node7", "http://127.0.0.1:8265/"},
      {"10.1.2.3", "node7", "http://10.1.2.3:8265/"},
      {"node7.example.org", "node7", "http://node7.example.org:8265/"},
      {"::1", "node7", "http://[::1]:8265/"},
      {"[::1]", "node7", "http://[::1]:8265/"},
      {"fe80::1", "node7", "http://[fe80::1]:8265/"},
      // Every address: the host's name, which a browser (here or on another machine) can open.
      {"0.0.0.0", "node7", "http://node7:8265/"},
      {"::", "node7", "http://node7:8265/"},
      {"[::]", "node7", "http://node7:8265/"},
      {"0:0:0:0:0:0:0:0", "node7", "http://node7:8265/"},
      // No name known: loopback, which at least this machine's browser opens.
      {"0.0.0.0", "", "http://127.0.0.1:8265/"},
      {"::", "", "http://[::1]:8265/"},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(status_url(row.status_host, 8265, row.host_name), row.url) << row.status_host << " on " << row.host_name;
  }
}

}  // namespace
}  // namespace ddprun::launcher
