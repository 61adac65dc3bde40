// --rdzv-backend's names: the one spelling of each backend, and the texts that name none.
#include "rendezvous/rdzv_backend.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string_view>

using namespace ddprun::rendezvous;

TEST(RdzvBackend, EachBackendHasOneNameThatReadsBack) {
  struct Case {
    RdzvBackend backend;
    std::string_view name;
  };
  const Case cases[] = {{RdzvBackend::static_, "static"}, {RdzvBackend::c10d, "c10d"}, {RdzvBackend::etcd_v3, "etcd-v3"}};
  for (const auto& c : cases) {
    EXPECT_EQ(backend_name(c.backend), c.name);
    EXPECT_EQ(backend_named(c.name), c.backend) << c.name;
  }
  EXPECT_EQ(backend_names(), "static, c10d, etcd-v3");
}

TEST(RdzvBackend, OtherTextsNameNoBackend) {
  for (std::string_view text : {"", "C10D", "Static", " static", "c10d ", "etcd", "etcd-v2", "etcd_v3", "static_"}) {
    EXPECT_EQ(backend_named(text), std::nullopt) << '"' << text << '"';
  }
}
