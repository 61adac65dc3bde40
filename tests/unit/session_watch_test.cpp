// SessionWatch on a real pipe and a real event loop: bytes keep the session, end of file or
// silence for the timeout ends it (once); DDPRUN_SESSION_WATCH's values, by table.
#include "launcher/fleet/session_watch.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/steady_timer.hpp>

namespace ddprun::launcher {
namespace {

using namespace std::chrono_literals;

TEST(SessionWatchTimeout, Table) {
  EXPECT_EQ(session_watch_timeout({}), std::nullopt);
  EXPECT_EQ(session_watch_timeout({{"DDPRUN_SESSION_WATCH", ""}}), std::nullopt);
  EXPECT_EQ(session_watch_timeout({{"DDPRUN_SESSION_WATCH", "x"}}), std::nullopt);
  EXPECT_EQ(session_watch_timeout({{"DDPRUN_SESSION_WATCH", "0"}}), std::nullopt);
  EXPECT_EQ(session_watch_timeout({{"DDPRUN_SESSION_WATCH", "10"}}), 10000ms);
  EXPECT_EQ(session_watch_timeout({{"DDPRUN_SESSION_WATCH", "0.5"}}), 500ms);
}

/// A watch on a pipe; `feed` runs on the loop every 100 ms until it returns false.
struct Watched {
  boost::asio::io_context io;
  int fds[2] = {-1, -1};
  std::vector<std::string> ended;
  std::unique_ptr<SessionWatch> watch;
  explicit Watched(std::chrono::milliseconds timeout) {
    EXPECT_EQ(::pipe(fds), 0);
    watch = std::make_unique<SessionWatch>(io, fds[0], timeout, [this](const std::string& why) {
      ended.push_back(why);
      io.stop();
    });
  }
  ~Watched() {
    watch.reset();
    ::close(fds[0]);
    if (fds[1] >= 0) ::close(fds[1]);
  }
};

TEST(SessionWatch, KeepAliveBytesKeepItThenSilenceEndsIt) {
  Watched w(400ms);
  boost::asio::steady_timer tick(w.io);
  int sent = 0;
  std::function<void()> beat = [&] {
    if (sent++ >= 10) return;  // 1 s of keep-alives, then silence
    EXPECT_EQ(::write(w.fds[1], "\n", 1), 1);
    tick.expires_after(100ms);
    tick.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) beat();
    });
  };
  beat();
  auto start = std::chrono::steady_clock::now();
  w.io.run_for(10s);
  ASSERT_EQ(w.ended.size(), 1u);
  EXPECT_NE(w.ended[0].find("nothing heard from the launching ddprun for 400 ms"), std::string::npos) << w.ended[0];
  EXPECT_GE(std::chrono::steady_clock::now() - start, 1s);  // the keep-alives held it
}

TEST(SessionWatch, EndOfFileEndsItAtOnce) {
  Watched w(60s);
  ::close(w.fds[1]);
  w.fds[1] = -1;
  w.io.run_for(10s);
  ASSERT_EQ(w.ended.size(), 1u);
  EXPECT_NE(w.ended[0].find("its ssh connection closed"), std::string::npos) << w.ended[0];
}

}  // namespace
}  // namespace ddprun::launcher
