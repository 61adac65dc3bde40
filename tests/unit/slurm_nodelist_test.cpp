// common/slurm_nodelist: Slurm's host lists and per-node counts, by table. The runtime's
// expand_slurm_nodelist (tests/runtime/identity_test.cpp) and the launcher's Slurm step
// (slurm_env_test.cpp) read them through these two functions.
#include "common/slurm_nodelist.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace ddprun::common {
namespace {

using Hosts = std::vector<std::string>;

struct NodelistCase {
  const char* text;
  Hosts hosts;
};

TEST(SlurmNodelist, ExpandsEveryForm) {
  const NodelistCase cases[] = {
      {"a", {"a"}},
      {"node[01-03,07],gpu5", {"node01", "node02", "node03", "node07", "gpu5"}},
      {"n[8-11]", {"n8", "n9", "n10", "n11"}},
      {"n[098-101]", {"n098", "n099", "n100", "n101"}},  // the lower bound's padding is kept
      {"r[1-2]-n[1,3]", {"r1-n1", "r1-n3", "r2-n1", "r2-n3"}},
      {"n[1-2]-ib,x", {"n1-ib", "n2-ib", "x"}},
      {"node[1-2]", {"node1", "node2"}},  // as a real 2-node srun printed it (slurm_test.cpp)
      {"n[5]", {"n5"}},
      {"a.example.org,b.example.org", {"a.example.org", "b.example.org"}},
  };
  for (const auto& c : cases) EXPECT_EQ(expand_slurm_nodelist(c.text), c.hosts) << c.text;
}

TEST(SlurmNodelist, RefusesMalformedWithTheReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty host"},
      {"a,,b", "empty host"},
      {"a,", "empty host"},
      {"n[1-2", "unbalanced '['"},
      {"n1-2]", "unbalanced ']'"},
      {"a]b[c", "unbalanced ']'"},
      {"n[]", "empty brackets"},
      {"n[3-1]", "bad range \"3-1\""},
      {"n[a-b]", "bad range"},
      {"n[1-]", "bad range"},
      {"n[-1]", "bad range"},
      {"n[1-999999999]", "more than 1000000 hosts"},
      {"a[0-999]b[0-999]c[0-9]", "more than 1000000 hosts"},  // a product may not explode either
  };
  for (const auto& [text, reason] : cases) {
    try {
      expand_slurm_nodelist(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << text << ": " << e.what();
    }
  }
}

TEST(SlurmCounts, ExpandsEveryForm) {
  const std::pair<const char*, std::vector<int>> cases[] = {
      {"1", {1}},
      {"2(x3),1", {2, 2, 2, 1}},
      {"1(x2)", {1, 1}},  // SLURM_TASKS_PER_NODE of a real sbatch -N2
      {"4,4,2", {4, 4, 2}},
      {"0", {0}},
  };
  for (const auto& [text, counts] : cases) EXPECT_EQ(expand_slurm_counts(text), counts) << text;
}

TEST(SlurmCounts, RefusesMalformed) {
  for (const char* text : {"", ",", "2(3),1", "2(x),1", "2(x0)", "x", "-1", "2(x3", "2(x1000001)", "3000000000",
                           "1(x600000),1(x600000)"}) {
    EXPECT_THROW(expand_slurm_counts(text), std::invalid_argument) << text;
  }
}

}  // namespace
}  // namespace ddprun::common
