// The etcd-v3 rendezvous with real ddprun agents and Debian's etcd-server, started and stopped
// here. First a single member on loopback: jobs of a fixed size and elastic jobs form, a worker's
// failure restarts every node, a third node scales a job of two, a frozen agent loses its lease and
// is dropped, and the errors a user reads (also when the endpoint is not etcd at all: a TCPStore, an
// ssh server). Then a 3-member cluster in network namespaces, one
// member and one agent per "machine": an elastic 2:3 job runs through the SIGKILL of the etcd
// leader without a restart, then re-forms on the survivors within the lease TTL (plus a margin)
// after the SIGKILL of an agent, and a survivor frozen with SIGSTOP loses its lease and is dropped.
// The cluster test runs twice: over plain HTTP, and over TLS with client certificates (etcd's
// --client-cert-auth); a job over TLS on one member restarts after a worker's failure too.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <regex>
#include <thread>

#include "../support/etcd_member.hpp"
#include "../support/free_port.hpp"
#include "../support/test_certificates.hpp"
#include "harness.hpp"
#include "multinode_support.hpp"
#include "netns_lab.hpp"

using namespace ddprun::testing;
using namespace std::chrono_literals;

namespace {

constexpr auto kJobBound = std::chrono::seconds(120);
/// The lease TTL of these jobs, and how long past it a dropped node may take to be acted on:
/// the next keep-alive look (1 s) plus a round of store operations, with room for a crowded machine.
constexpr int kLeaseTtl = 3;
constexpr auto kDropMargin = std::chrono::seconds(20);

std::vector<std::string> etcd_node(const std::string& nnodes, const std::string& endpoints, const std::string& run_id,
                                   int nproc, const std::string& conf) {
  return {"--nnodes=" + nnodes,
          "--rdzv-backend=etcd-v3",
          "--rdzv-endpoint=" + endpoints,
          "--rdzv-id=" + run_id,
          "--nproc-per-node=" + std::to_string(nproc),
          "--rdzv-conf=lease_ttl=" + std::to_string(kLeaseTtl) + ",keep_alive_interval=1,read_timeout=30," + conf};
}

std::vector<std::string> plain_sgd_command() { return concat({plain_sgd_binary()}, plain_sgd_args()); }

/// A worker that appends "start <RANK> <WORLD_SIZE> <RESTART_COUNT> <pid>" to DIR/starts and then
/// waits (at most 3 minutes) for DIR/go, then exits 0.
std::string go_worker(const TempDir& dir) {
  const std::string d = "\"" + dir.str() + "\"";
  return write_script(dir, "go_worker",
                      "echo \"start $RANK $WORLD_SIZE $TORCHELASTIC_RESTART_COUNT $$\" >> " + d +
                          "/starts\n"
                          "i=0; while [ ! -e " + d + "/go ] && [ $i -lt 3600 ]; do sleep 0.05; i=$((i+1)); done\n"
                          "exit 0\n");
}

struct Start {
  int rank;
  int world;
  int restarts;
  pid_t pid;
};

std::vector<Start> starts(const TempDir& dir) {
  std::vector<Start> out;
  std::ifstream in(dir.path() / "starts");
  std::string word;
  Start s{};
  while (in >> word >> s.rank >> s.world >> s.restarts >> s.pid) out.push_back(s);
  return out;
}

/// The starts of worlds of `world` workers among those after the first `skip`.
int starts_of_world(const TempDir& dir, int world, std::size_t skip = 0) {
  int count = 0;
  auto all = starts(dir);
  for (std::size_t i = skip; i < all.size(); ++i) count += all[i].world == world ? 1 : 0;
  return count;
}

std::string crash_once_worker(const TempDir& dir) {
  std::string sgd = plain_sgd_binary();
  for (const auto& arg : plain_sgd_args()) sgd += " " + arg;
  return write_script(dir, "crash_once",
                      "echo \"$TORCHELASTIC_RESTART_COUNT\" >> \"" + dir.str() +
                          "/restarts_rank$RANK\"\n"
                          "if [ \"$RANK\" = 2 ] && [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then exit 3; fi\n"
                          "exec " + sgd + "\n");
}

class EtcdSingleMember : public ::testing::Test {
 protected:
  void SetUp() override {
    if (etcd_binary().empty()) GTEST_SKIP() << "etcd is not installed (Debian's etcd-server, scripts/setup.sh --tests)";
    etcd_ = std::make_unique<EtcdMember>();
    ASSERT_TRUE(etcd_->wait_ready()) << "etcd did not come up";
  }
  std::string endpoint() const { return etcd_->endpoint(); }

  std::vector<std::pair<std::string, Outcome>> run_nodes(const std::vector<std::vector<std::string>>& nodes) {
    std::vector<std::unique_ptr<Launch>> launches;
    for (const auto& args : nodes) launches.push_back(std::make_unique<Launch>(args));
    std::vector<std::pair<std::string, Outcome>> outcomes;
    for (std::size_t i = 0; i < launches.size(); ++i) {
      outcomes.emplace_back("node " + std::to_string(i), launches[i]->wait(kJobBound));
    }
    return outcomes;
  }

  std::unique_ptr<EtcdMember> etcd_;
};

std::string stdout_of_succeeded(const std::vector<std::pair<std::string, Outcome>>& outcomes) {
  std::string out;
  for (const auto& [name, outcome] : outcomes) {
    EXPECT_EQ(outcome.exit_status, 0) << all_output(outcomes);
    out += outcome.out;
  }
  return out;
}

TEST_F(EtcdSingleMember, AJobOfFixedSizeFormsAndTrains) {
  std::vector<std::vector<std::string>> nodes(
      2, concat(etcd_node("2", endpoint(), "fixed", 2, "join_timeout=60"), plain_sgd_command()));
  auto outcomes = run_nodes(nodes);
  EXPECT_EQ(plain_sgd_missing(stdout_of_succeeded(outcomes), 4), "") << all_output(outcomes);
}

TEST_F(EtcdSingleMember, AnElasticJobFormsWithMinNodesAfterTheLastCall) {
  std::vector<std::vector<std::string>> nodes(
      2, concat(etcd_node("2:3", endpoint(), "elastic", 2, "join_timeout=60,last_call_timeout=1"), plain_sgd_command()));
  auto outcomes = run_nodes(nodes);
  EXPECT_EQ(plain_sgd_missing(stdout_of_succeeded(outcomes), 4), "") << all_output(outcomes);
}

TEST_F(EtcdSingleMember, AWorkerFailureRestartsEveryNodeTogether) {
  TempDir dir;
  const std::string worker = crash_once_worker(dir);
  std::vector<std::vector<std::string>> nodes(
      2, concat(etcd_node("2:3", endpoint(), "crash", 2, "join_timeout=60,last_call_timeout=1"),
                {"--max-restarts=1", worker}));
  auto outcomes = run_nodes(nodes);
  EXPECT_EQ(plain_sgd_missing(stdout_of_succeeded(outcomes), 4), "") << all_output(outcomes);
  EXPECT_EQ(read_file(dir.path() / "restarts_rank2"), "0\n1\n");
}

TEST_F(EtcdSingleMember, AThirdNodeScalesAJobOfTwoToThree) {
  TempDir dir;
  const std::string worker = go_worker(dir);
  const auto flags = etcd_node("2:3", endpoint(), "scale", 1, "join_timeout=60,last_call_timeout=1");
  Launch a(concat(flags, {worker}));
  Launch b(concat(flags, {worker}));
  ASSERT_TRUE(eventually([&] { return starts_of_world(dir, 2) == 2; }, 60s)) << "no round of 2 started";
  Launch c(concat(flags, {worker}));
  ASSERT_TRUE(eventually([&] { return starts_of_world(dir, 3) == 3; }, 60s)) << "the job did not scale to 3";
  for (const auto& s : starts(dir)) EXPECT_EQ(s.restarts, 0) << "scaling up uses no restart";
  std::ofstream(dir.path() / "go");
  for (Launch* launch : {&a, &b, &c}) {
    Outcome outcome = launch->wait(kJobBound);
    EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  }
}

TEST_F(EtcdSingleMember, AFrozenAgentLosesItsLeaseAndIsDropped) {
  TempDir dir;
  const std::string worker = go_worker(dir);
  const auto flags = etcd_node("2:3", endpoint(), "frozen", 1, "join_timeout=60,last_call_timeout=1");
  Launch a(concat(flags, {worker}));
  Launch b(concat(flags, {worker}));
  Launch c(concat(flags, {worker}));
  ASSERT_TRUE(eventually([&] { return starts_of_world(dir, 3) == 3; }, 60s)) << "no round of 3 started";
  const std::size_t before = starts(dir).size();
  c.send(SIGSTOP);
  const auto frozen_at = std::chrono::steady_clock::now();
  const bool reformed = eventually([&] { return starts_of_world(dir, 2, before) == 2; },
                                   std::chrono::seconds(kLeaseTtl) + kDropMargin);
  const auto took = std::chrono::steady_clock::now() - frozen_at;
  c.send(SIGCONT);
  EXPECT_TRUE(reformed) << "the others did not re-form without the frozen agent";
  std::cerr << "re-formed without the frozen agent after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
  std::ofstream(dir.path() / "go");
  Outcome oa = a.wait(kJobBound);
  Outcome ob = b.wait(kJobBound);
  Outcome oc;
  ends_by_itself(c, 60s, oc);
  EXPECT_EQ(oa.exit_status, 0) << oa.err;
  EXPECT_EQ(ob.exit_status, 0) << ob.err;
  EXPECT_NE((oa.err + ob.err).find("stopped heart-beating"), std::string::npos) << oa.err << ob.err;
}

// read_timeout is the store's silence counted from the first question it left unanswered, not from
// its last answer: an etcd that stops answering for less than read_timeout (a majority lost for a
// while, here the one member frozen) ends nothing, whenever between two beats it began.
TEST_F(EtcdSingleMember, AStoreSilentForLessThanReadTimeoutEndsNothing) {
  TempDir dir;
  const std::string worker = go_worker(dir);
  const auto flags =
      etcd_node("2", endpoint(), "outage", 1, "join_timeout=60,lease_ttl=15,keep_alive_interval=4,read_timeout=6");
  Launch a(concat(flags, {worker}));
  Launch b(concat(flags, {worker}));
  ASSERT_TRUE(eventually([&] { return starts_of_world(dir, 2) == 2; }, 60s)) << "no round of 2 started";
  std::this_thread::sleep_for(4s);  // a beat or two in
  etcd_->signal(SIGSTOP);
  std::this_thread::sleep_for(5s);  // less than read_timeout, but past the last answer + read_timeout mostly
  etcd_->signal(SIGCONT);
  std::this_thread::sleep_for(3s);
  EXPECT_TRUE(process_alive(a.pid()) && process_alive(b.pid())) << "an agent ended";
  EXPECT_EQ(starts(dir).size(), 2U) << "a worker stopped or started";
  std::ofstream(dir.path() / "go");
  for (Launch* launch : {&a, &b}) {
    Outcome outcome = launch->wait(kJobBound);
    EXPECT_EQ(outcome.exit_status, 0) << outcome.err;
  }
}

TEST_F(EtcdSingleMember, AnotherJobShapeUnderTheSameKeyPrefixIsNamed) {
  TempDir dir;
  const std::string worker = go_worker(dir);
  Launch a(concat(etcd_node("2:2", endpoint(), "shared", 1, "join_timeout=60"), {worker}));
  ASSERT_TRUE(eventually(
      [&] {
        return !run_command({"/usr/bin/etcdctl", "--endpoints=" + endpoint(), "get", "/ddprun/rdzv/shared/shape",
                             "--print-value-only"})
                    .output.empty();
      },
      30s))
      << "the first node recorded no job shape";
  Outcome other = run_ddprun(concat(etcd_node("2:3", endpoint(), "shared", 1, "join_timeout=60"), {"/bin/true"}));
  EXPECT_EQ(other.exit_status, 1) << other.err;
  EXPECT_NE(other.err.find("says --nnodes=2:3, but this job was started with --nnodes=2 "), std::string::npos)
      << other.err;
  EXPECT_NE(other.err.find("(key prefix '/' of etcd-v3 at " + endpoint() + " holds job 'shared': if that is another "
                           "job, give this one its own --rdzv-id or key_prefix in --rdzv-conf)"),
            std::string::npos)
      << other.err;
  a.send(SIGTERM);
  a.wait(kJobBound);
}

TEST_F(EtcdSingleMember, NoReachableMemberIsOneLineNamingEachAndHowLong) {
  const std::string dead = "127.0.0.1:" + std::to_string(free_port()) + ",127.0.0.1:" + std::to_string(free_port());
  Outcome outcome = run_ddprun(concat(etcd_node("2", dead, "nobody", 1, "join_timeout=2"), {"/bin/true"}));
  EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
  EXPECT_NE(outcome.err.find("no etcd member answered within 2 s: 127.0.0.1:"), std::string::npos) << outcome.err;
  EXPECT_NE(outcome.err.find("(Connection refused)"), std::string::npos) << outcome.err;
  EXPECT_EQ(first_unprefixed_line(outcome.err), "") << outcome.err;
}

TEST_F(EtcdSingleMember, ABadEndpointListIsAUsageError) {
  Outcome outcome = run_ddprun({"--nnodes=2", "--rdzv-backend=etcd-v3", "--rdzv-endpoint=h1:2379,h2:notaport", "/bin/true"});
  EXPECT_EQ(outcome.exit_status, 2) << outcome.err;
  EXPECT_NE(outcome.err.find("is not an etcd-v3 rendezvous"), std::string::npos) << outcome.err;
}

/// A TCP listener on loopback that greets each connection as an ssh server does (its banner line),
/// reads what the client sends, and closes: something that answers with bytes that are not HTTP.
class SshBannerServer {
 public:
  static constexpr const char* kBanner = "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n";
  SshBannerServer() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(listener_, 16) != 0) {
      throw std::runtime_error("the ssh-like listener cannot listen");
    }
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd ready{listener_, POLLIN, 0};
        if (::poll(&ready, 1, 100) <= 0) continue;
        const int fd = ::accept(listener_, nullptr, nullptr);
        if (fd < 0) continue;
        (void)::send(fd, kBanner, std::strlen(kBanner), MSG_NOSIGNAL);
        char request[4096];
        pollfd readable{fd, POLLIN, 0};
        if (::poll(&readable, 1, 1000) > 0) (void)::recv(fd, request, sizeof request, 0);
        ::close(fd);
      }
    });
  }
  ~SshBannerServer() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// How long a ddprun pointed at something that is not etcd may take to say so: far less than the
/// join timeout it is given (the test asserts only that it did not wait that out).
constexpr int kNotEtcdJoinTimeout = 20;
constexpr auto kWellBeforeTheJoinTimeout = std::chrono::seconds(12);

/// Runs a one-node etcd-v3 job against `endpoint` with a join timeout of kNotEtcdJoinTimeout.
Outcome run_against(const std::string& endpoint, std::chrono::steady_clock::duration& took) {
  const auto start = std::chrono::steady_clock::now();
  Outcome outcome = run_ddprun({"--nnodes=1", "--nproc-per-node=1", "--rdzv-backend=etcd-v3",
                                "--rdzv-endpoint=" + endpoint, "--rdzv-id=not-etcd",
                                "--rdzv-conf=join_timeout=" + std::to_string(kNotEtcdJoinTimeout), "/bin/true"});
  took = std::chrono::steady_clock::now() - start;
  return outcome;
}

// A c10d TCPStore on the port (an easy slip when switching from c10d): it closes the connection on
// an HTTP request without a word. Once that waited out the join timeout ("end of stream").
TEST(EtcdEndpointThatIsNotEtcd, ATcpStoreIsNamedOnOneLineAtOnce) {
  TempDir dir;
  Launch store(Launch::Command{{ddprun_store_binary(), "--host", "127.0.0.1", "--port", "0", "--port-file",
                                (dir.path() / "port").string()}});
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(dir.path() / "port"); })) << "no port file";
  const std::string endpoint = "127.0.0.1:" + std::to_string(std::stoi(read_file(dir.path() / "port")));
  std::chrono::steady_clock::duration took{};
  Outcome outcome = run_against(endpoint, took);
  EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
  EXPECT_LT(took, kWellBeforeTheJoinTimeout) << outcome.err;
  EXPECT_NE(outcome.err.find("the server at " + endpoint + " closed the connection without a word on each of 3 HTTP "
                             "requests: it does not speak HTTP (a TCPStore, c10d's or ddprun-store, does so): is it "
                             "etcd's client port?"),
            std::string::npos)
      << outcome.err;
  EXPECT_EQ(outcome.err.find("waiting for the rendezvous store"), std::string::npos) << outcome.err;
  EXPECT_EQ(first_unprefixed_line(outcome.err), "") << outcome.err;
  store.send(SIGTERM);
  store.wait();
}

// An ssh server on the port: its banner is not HTTP. Once that waited out the join timeout ("bad
// version"); now the error quotes what it sent.
TEST(EtcdEndpointThatIsNotEtcd, AnSshServerIsNamedWithWhatItSentAtOnce) {
  SshBannerServer ssh;
  std::chrono::steady_clock::duration took{};
  Outcome outcome = run_against(ssh.endpoint(), took);
  EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
  EXPECT_LT(took, kWellBeforeTheJoinTimeout) << outcome.err;
  EXPECT_NE(outcome.err.find("the server at " + ssh.endpoint() + " does not speak HTTP (it sent 'SSH-2.0-OpenSSH_9.2p1 "
                             "Debian-2+deb12u3'): is it etcd's client port?"),
            std::string::npos)
      << outcome.err;
  EXPECT_EQ(outcome.err.find("waiting for the rendezvous store"), std::string::npos) << outcome.err;
  EXPECT_EQ(first_unprefixed_line(outcome.err), "") << outcome.err;
}

/// --rdzv-conf's TLS keys for `certificates`' client: the CA, and its certificate and key.
std::string tls_conf(const TestCertificates& certificates) {
  return "cacert=" + certificates.ca() + ",cert=" + certificates.client_cert() + ",key=" + certificates.client_key();
}

/// One member that speaks only TLS and wants a client certificate its CA signed.
class EtcdSingleTlsMember : public ::testing::Test {
 protected:
  void SetUp() override {
    if (etcd_binary().empty()) GTEST_SKIP() << "etcd is not installed (Debian's etcd-server, scripts/setup.sh --tests)";
    EtcdMember::Options options;
    options.tls_cert = certificates_.server_cert();
    options.tls_key = certificates_.server_key();
    options.tls_client_ca = certificates_.ca();
    etcd_ = std::make_unique<EtcdMember>(options);
    ASSERT_TRUE(etcd_->wait_ready()) << "etcd did not come up";
  }
  TestCertificates certificates_{{"127.0.0.1"}};
  std::unique_ptr<EtcdMember> etcd_;
};

TEST_F(EtcdSingleTlsMember, AWorkerFailureRestartsEveryNodeTogether) {
  TempDir dir;
  const std::string worker = crash_once_worker(dir);
  const auto flags = etcd_node("2:3", etcd_->client_url(), "crash", 2,
                               "join_timeout=60,last_call_timeout=1," + tls_conf(certificates_));
  Launch a(concat(flags, {"--max-restarts=1", worker}));
  Launch b(concat(flags, {"--max-restarts=1", worker}));
  std::vector<std::pair<std::string, Outcome>> outcomes = {{"node 0", a.wait(kJobBound)}, {"node 1", b.wait(kJobBound)}};
  EXPECT_EQ(plain_sgd_missing(stdout_of_succeeded(outcomes), 4), "") << all_output(outcomes);
  EXPECT_EQ(read_file(dir.path() / "restarts_rank2"), "0\n1\n");
}

TEST_F(EtcdSingleTlsMember, NoClientCertificateIsOneLineAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  Outcome outcome = run_ddprun(concat(etcd_node("2", etcd_->client_url(), "nocert", 1,
                                                "join_timeout=60,cacert=" + certificates_.ca()),
                                      {"/bin/true"}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "it waited for the join timeout";
  EXPECT_EQ(outcome.exit_status, 1) << outcome.err;
  EXPECT_NE(outcome.err.find("etcd may want a client certificate (--client-cert-auth): set cert and key in "
                             "--rdzv-conf"),
            std::string::npos)
      << outcome.err;
  EXPECT_EQ(first_unprefixed_line(outcome.err), "") << outcome.err;
}

// A 3-member cluster, one member and one agent per namespace ("machine").
/// The parameter: TLS with client certificates (on every member) or plain HTTP.
class EtcdCluster : public ::testing::TestWithParam<bool> {
 protected:
  static constexpr int kMembers = 3;
  bool tls() const { return GetParam(); }

  void SetUp() override {
    if (etcd_binary().empty()) GTEST_SKIP() << "etcd is not installed (Debian's etcd-server, scripts/setup.sh --tests)";
    std::string why_not;
    lab_ = NetnsLab::create(kMembers, why_not);
    if (!lab_) GTEST_SKIP() << why_not;
    std::string initial;
    std::vector<std::string> addresses;
    for (int i = 0; i < kMembers; ++i) {
      if (!initial.empty()) initial += ",";
      initial += "m" + std::to_string(i) + "=http://" + lab_->address(i) + ":2380";
      if (!endpoints_.empty()) endpoints_ += ",";
      endpoints_ += scheme() + lab_->address(i) + ":2379";
      addresses.push_back(lab_->address(i));
    }
    if (tls()) certificates_ = std::make_unique<TestCertificates>(addresses);
    for (int i = 0; i < kMembers; ++i) {
      EtcdMember::Options options;
      options.name = "m" + std::to_string(i);
      options.host = lab_->address(i);
      options.client_port = 2379;
      options.peer_port = 2380;
      options.initial_cluster = initial;
      options.prefix = lab_->in_node(i, {});
      if (tls()) {
        options.tls_cert = certificates_->server_cert();
        options.tls_key = certificates_->server_key();
        options.tls_client_ca = certificates_->ca();
      }
      members_.push_back(std::make_unique<EtcdMember>(options));
    }
    ASSERT_TRUE(eventually([&] { return leader() >= 0; }, 30s)) << "the etcd cluster elected no leader";
  }

  void TearDown() override {
    agents_.clear();
    members_.clear();
  }

  /// etcdctl inside node 0's namespace.
  CommandResult etcdctl(const std::string& endpoint, const std::vector<std::string>& args) {
    std::vector<std::string> command = {"/usr/bin/env", "ETCDCTL_API=3", "/usr/bin/etcdctl",
                                        "--endpoints=" + scheme() + endpoint, "--command-timeout=2s"};
    if (tls()) {
      command.insert(command.end(), {"--cacert=" + certificates_->ca(), "--cert=" + certificates_->client_cert(),
                                     "--key=" + certificates_->client_key()});
    }
    command.insert(command.end(), args.begin(), args.end());
    return run_command(lab_->in_node(0, command));
  }

  /// The index of the member that leads, or -1.
  int leader() {
    for (int i = 0; i < kMembers; ++i) {
      if (!members_[static_cast<std::size_t>(i)]->running()) continue;
      CommandResult status = etcdctl(lab_->address(i) + ":2379", {"endpoint", "status", "-w", "json"});
      std::smatch member, lead;
      if (status.status != 0) continue;
      if (std::regex_search(status.output, member, std::regex("\"member_id\":(\\d+)")) &&
          std::regex_search(status.output, lead, std::regex("\"leader\":(\\d+)")) && member[1] == lead[1]) {
        return i;
      }
    }
    return -1;
  }

  void start_agent(int node, const std::vector<std::string>& args) {
    agents_.push_back(std::make_unique<Launch>(Launch::Command{lab_->in_node(node, concat({ddprun_binary()}, args))}));
  }

  std::string scheme() const { return tls() ? "https://" : "http://"; }
  /// The agents' --rdzv-conf for TLS, or "".
  std::string conf() const { return tls() ? "," + tls_conf(*certificates_) : std::string(); }

  std::unique_ptr<NetnsLab> lab_;
  std::unique_ptr<TestCertificates> certificates_;
  std::vector<std::unique_ptr<EtcdMember>> members_;
  std::vector<std::unique_ptr<Launch>> agents_;
  std::string endpoints_;
};

TEST_P(EtcdCluster, AJobOutlivesTheEtcdLeaderAndThenAnAgent) {
  TempDir dir;
  const std::string worker = go_worker(dir);
  const auto flags = etcd_node("2:3", endpoints_, "cluster", 1, "join_timeout=60,last_call_timeout=3" + conf());
  for (int node = 0; node < kMembers; ++node) start_agent(node, concat(flags, {worker}));
  ASSERT_TRUE(eventually([&] { return starts_of_world(dir, 3) == 3; }, 60s)) << "no round of 3 started";

  // The leader's machine loses its etcd: the job goes on, no worker stops or starts.
  const int leader_index = leader();
  ASSERT_GE(leader_index, 0);
  members_[static_cast<std::size_t>(leader_index)]->kill();
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] { return leader() >= 0; }, 30s)) << "no new leader";
  std::cerr << "new etcd leader after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed_at).count()
            << " ms\n";
  std::this_thread::sleep_for(std::chrono::seconds(3 * kLeaseTtl));  // several lease renewals and heartbeats
  EXPECT_EQ(starts(dir).size(), 3U) << "a worker stopped or started after the etcd leader died";
  for (const auto& agent : agents_) EXPECT_TRUE(process_alive(agent->pid())) << "an agent ended";

  // Then that machine's agent dies too: the survivors re-form within the lease TTL and a margin.
  const std::size_t before = starts(dir).size();
  agents_[static_cast<std::size_t>(leader_index)]->send(SIGKILL);
  const auto agent_killed_at = std::chrono::steady_clock::now();
  const bool reformed = eventually([&] { return starts_of_world(dir, 2, before) == 2; },
                                   std::chrono::seconds(kLeaseTtl) + kDropMargin);
  EXPECT_TRUE(reformed) << "the survivors did not re-form";
  std::cerr << "survivors re-formed after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - agent_killed_at)
                   .count()
            << " ms\n";
  for (const auto& s : starts(dir)) EXPECT_EQ(s.restarts, 0) << "a membership change used a restart";

  // A survivor freezes (SIGSTOP): its lease lapses and the other drops it, stopping its own worker
  // (2:3 needs two nodes, so it waits); woken, the frozen one rejoins and the job re-forms.
  const int frozen = leader_index == 0 ? 1 : 0;
  std::vector<pid_t> workers;
  for (std::size_t i = before; i < starts(dir).size(); ++i) workers.push_back(starts(dir)[i].pid);
  const std::size_t before_freeze = starts(dir).size();
  agents_[static_cast<std::size_t>(frozen)]->send(SIGSTOP);
  const bool dropped = eventually(
      [&] {
        for (pid_t pid : workers) {
          if (!process_alive(pid)) return true;
        }
        return false;
      },
      std::chrono::seconds(kLeaseTtl) + kDropMargin);
  agents_[static_cast<std::size_t>(frozen)]->send(SIGCONT);
  EXPECT_TRUE(dropped) << "the frozen agent was not dropped";
  EXPECT_TRUE(eventually([&] { return starts_of_world(dir, 2, before_freeze) == 2; }, 60s))
      << "the job did not re-form once the frozen agent woke";

  std::ofstream(dir.path() / "go");
  std::vector<std::pair<std::string, Outcome>> outcomes;
  for (int node = 0; node < kMembers; ++node) {
    outcomes.emplace_back("agent " + std::to_string(node), agents_[static_cast<std::size_t>(node)]->wait(kJobBound));
    if (node != leader_index) {
      EXPECT_EQ(outcomes.back().second.exit_status, 0) << outcomes.back().second.err;
    }
  }
  EXPECT_NE(outcomes[static_cast<std::size_t>(frozen)].second.err.find("dropped this agent"), std::string::npos)
      << outcomes[static_cast<std::size_t>(frozen)].second.err;
  if (HasFailure()) ADD_FAILURE() << "killed etcd member and agent " << leader_index << "\n" << all_output(outcomes);
}

std::string transport_name(const ::testing::TestParamInfo<bool>& param) { return param.param ? "tls" : "http"; }
INSTANTIATE_TEST_SUITE_P(Transports, EtcdCluster, ::testing::Values(false, true), transport_name);

}  // namespace
