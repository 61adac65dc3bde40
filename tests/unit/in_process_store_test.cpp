// InProcessStore: the Store interface over a KeySpace in this process; waits woken by another
// coroutine's write, timeouts that follow manual time (or the real clock).
#include "rendezvous/in_process_store.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "rendezvous/store_error.hpp"
#include "tests/support/spawn_task.hpp"

using namespace ddprun::rendezvous;
using ddprun::testing::spawn;
using namespace std::chrono_literals;

namespace {

struct Fixture {
  boost::asio::io_context io;
  InProcessStore store{io.get_executor(), InProcessStore::Time::manual};
  void settle() {
    io.restart();
    io.poll();
  }
};

template <class... Keys>
std::vector<std::string> keys(Keys... k) {
  return std::vector<std::string>{std::string(k)...};
}

}  // namespace

TEST(InProcessStore, OperationsHaveTheServersSemantics) {
  Fixture f;
  // Parameters, not captures: a lambda's captures die with it, its coroutine's parameters live on.
  auto ops = spawn(f.io, [](Fixture& fixture) -> Task<void> {
    // Each result into a variable first: GCC 12 cannot have a braced list inside a co_await
    // expression ("array used as initializer").
    co_await fixture.store.set("a", "1");
    const std::string a = co_await fixture.store.get("a", 1s);
    EXPECT_EQ(a, "1");
    const std::int64_t five = co_await fixture.store.add("n", 5);
    EXPECT_EQ(five, 5);
    const std::int64_t three = co_await fixture.store.add("n", -2);
    EXPECT_EQ(three, 3);
    const std::string set = co_await fixture.store.compare_set("c", "", "x");
    EXPECT_EQ(set, "x") << "missing, nothing expected: set";
    const std::string kept = co_await fixture.store.compare_set("c", "y", "z");
    EXPECT_EQ(kept, "x") << "another value expected: kept";
    const std::string swapped = co_await fixture.store.compare_set("c", "x", "z");
    EXPECT_EQ(swapped, "z");
    const std::string expected = co_await fixture.store.compare_set("d", "e", "f");
    EXPECT_EQ(expected, "e") << "missing, a value expected: nothing set";
    const bool d = co_await fixture.store.check(keys("d"));
    EXPECT_FALSE(d);
    const bool all = co_await fixture.store.check(keys("a", "c", "n"));
    EXPECT_TRUE(all);
    const bool some = co_await fixture.store.check(keys("a", "d"));
    EXPECT_FALSE(some);
    const std::vector<std::string> values = co_await fixture.store.multi_get(keys("a", "c"), 1s);
    EXPECT_EQ(values, keys("1", "z"));
  }(f));
  f.settle();
  ASSERT_TRUE(ops->done);
  ops->get();
  EXPECT_EQ(f.store.address(), "in-process");
}

TEST(InProcessStore, AnAddToAValueThatIsNotANumberIsAStoreError) {
  Fixture f;
  auto add = spawn(f.io, [](Fixture& fixture) -> Task<std::int64_t> {
    co_await fixture.store.set("a", "x");
    co_return co_await fixture.store.add("a", 1);
  }(f));
  f.settle();
  ASSERT_TRUE(add->done);
  EXPECT_THROW(add->get(), StoreError);
}

TEST(InProcessStore, AWaitEndsWhenAnotherCoroutineSetsTheKeys) {
  Fixture f;
  auto waiting = spawn(f.io, f.store.multi_get({"a", "b"}, 10s));
  auto also = spawn(f.io, f.store.wait({"b"}, 10s));
  f.settle();
  EXPECT_FALSE(waiting->done);
  EXPECT_FALSE(also->done);
  spawn(f.io, f.store.set("b", "2"));
  f.settle();
  EXPECT_TRUE(also->done) << "b is there";
  EXPECT_FALSE(waiting->done) << "a is missing";
  spawn(f.io, f.store.add("a", 1));
  f.settle();
  ASSERT_TRUE(waiting->done);
  EXPECT_EQ(waiting->get(), (std::vector<std::string>{"1", "2"}));
  EXPECT_FALSE(f.store.next_deadline()) << "nothing waits any more";
}

TEST(InProcessStore, ManualTimeTimesAWaitOutAtItsDeadlineAndNotBefore) {
  Fixture f;
  const SteadyTime t0 = f.store.clock()();
  auto waiting = spawn(f.io, f.store.get("a", 30s));
  f.settle();
  ASSERT_EQ(f.store.next_deadline(), t0 + 30s);
  f.store.advance(29'999ms);
  f.settle();
  EXPECT_FALSE(waiting->done);
  f.store.advance(1ms);
  f.settle();
  ASSERT_TRUE(waiting->done);
  EXPECT_THROW(waiting->get(), StoreTimeout);
  EXPECT_EQ(waiting->error_message(), "in-process store: wait for a timed out after 30 s");
  // The store stays usable, and the abandoned wait does not come back to life.
  auto later = spawn(f.io, f.store.wait({"a"}, 5s));
  spawn(f.io, f.store.set("a", "1"));
  f.settle();
  EXPECT_TRUE(later->done);
  later->get();
}

TEST(InProcessStore, AdvanceToTheNextDeadlineTimesOutTheEarliestWaitOnly) {
  Fixture f;
  const SteadyTime t0 = f.store.clock()();
  auto soon = spawn(f.io, f.store.wait({"a"}, 2s));
  auto late = spawn(f.io, f.store.wait({"b"}, 5s));
  auto never = spawn(f.io, f.store.wait({"c"}, std::chrono::milliseconds::max()));
  f.settle();
  ASSERT_TRUE(f.store.advance_to_next_deadline());
  f.settle();
  EXPECT_EQ(f.store.clock()(), t0 + 2s);
  EXPECT_TRUE(soon->done);
  EXPECT_FALSE(late->done);
  ASSERT_TRUE(f.store.advance_to_next_deadline());
  f.settle();
  EXPECT_TRUE(late->done);
  EXPECT_FALSE(f.store.advance_to_next_deadline()) << "a wait without a deadline has none to move to";
  EXPECT_FALSE(never->done);
  spawn(f.io, f.store.set("c", ""));
  f.settle();
  EXPECT_TRUE(never->done);
}

TEST(InProcessStore, RealTimeWaitsTimeOutByThemselves) {
  boost::asio::io_context io;
  InProcessStore store(io.get_executor());
  const auto start = std::chrono::steady_clock::now();
  auto waiting = spawn(io, store.wait({"a"}, 50ms));
  io.run();
  ASSERT_TRUE(waiting->done);
  EXPECT_THROW(waiting->get(), StoreTimeout);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
  EXPECT_GE(store.clock()(), start + 50ms);
}
