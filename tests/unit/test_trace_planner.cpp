// The seed's trace timing: checks every 150 ms, at most 20, strictly more
// than 450 ms triggers, the capture ends 3 s after the trigger.
#include <catch2/catch.hpp>

#include "trace/planner.h"

using jankbpf::TracePlanner;
using Action = TracePlanner::Action;
using State = TracePlanner::State;

namespace {
constexpr int64_t ms(int64_t v) { return v * 1'000'000; }
}  // namespace

TEST_CASE("a check that sees a task over 450 ms triggers; save 3 s later", "[trace]") {
  TracePlanner p;
  CHECK(p.state() == State::Idle);
  CHECK_FALSE(p.deadline());
  p.start(ms(1000));
  CHECK(p.state() == State::Checking);
  REQUIRE(p.deadline() == ms(1150));
  CHECK(p.on_deadline(ms(1150), ms(300)) == Action::None);
  REQUIRE(p.deadline() == ms(1300));
  // Exactly 450 ms triggers nothing.
  CHECK(p.on_deadline(ms(1300), ms(450)) == Action::None);
  REQUIRE(p.deadline() == ms(1450));
  CHECK(p.on_deadline(ms(1450), ms(450) + 1) == Action::Triggered);
  CHECK(p.checks_done() == 3);
  CHECK(p.state() == State::Capturing);
  CHECK(p.trigger_ns() == ms(1450));
  REQUIRE(p.deadline() == ms(4450));
  CHECK(p.capture_end_ns() == ms(4450));
  CHECK(p.on_deadline(ms(4449), ms(3000)) == Action::None);
  CHECK(p.on_deadline(ms(4450)) == Action::Save);
  CHECK(p.state() == State::Done);
  CHECK_FALSE(p.deadline());
  CHECK(p.on_deadline(ms(5000), ms(9000)) == Action::None);
}

TEST_CASE("twenty checks without a task over the bound give up", "[trace]") {
  TracePlanner p;
  p.start(0);
  for (int i = 1; i < 20; ++i) {
    REQUIRE(p.deadline() == ms(150 * i));
    CHECK(p.on_deadline(ms(150 * i), ms(200)) == Action::None);
  }
  REQUIRE(p.deadline() == ms(3000));
  CHECK(p.on_deadline(ms(3000), ms(450)) == Action::GaveUp);
  CHECK(p.checks_done() == 20);
  CHECK(p.state() == State::Done);
  CHECK_FALSE(p.trigger_ns());
  CHECK_FALSE(p.deadline());
}

TEST_CASE("the twentieth check may still trigger", "[trace]") {
  TracePlanner p;
  p.start(0);
  for (int i = 1; i < 20; ++i) p.on_deadline(ms(150 * i), -1);
  CHECK(p.on_deadline(ms(3000), ms(451)) == Action::Triggered);
  CHECK(p.deadline() == ms(6000));
}

TEST_CASE("an observation between checks triggers at once", "[trace]") {
  TracePlanner p;
  p.start(0);
  CHECK(p.observe(ms(100), ms(450)) == Action::None);
  CHECK(p.state() == State::Checking);
  CHECK(p.observe(ms(120), ms(451)) == Action::Triggered);
  CHECK(p.trigger_ns() == ms(120));
  CHECK(p.checks_done() == 0);
  // A second crossing does not move the window.
  CHECK(p.observe(ms(200), ms(900)) == Action::None);
  CHECK(p.deadline() == ms(3120));
}

TEST_CASE("an observation triggers without start()", "[trace]") {
  TracePlanner p;
  CHECK(p.observe(ms(10), ms(460)) == Action::Triggered);
  CHECK(p.deadline() == ms(3010));
  CHECK(p.on_deadline(ms(3010)) == Action::Save);
}

TEST_CASE("early and late wakeups", "[trace]") {
  TracePlanner p;
  p.start(0);
  // Early: not a check.
  CHECK(p.on_deadline(ms(149), ms(1000)) == Action::None);
  CHECK(p.checks_done() == 0);
  // Late by more than an interval: one check, the next an interval later.
  CHECK(p.on_deadline(ms(500), ms(10)) == Action::None);
  CHECK(p.checks_done() == 1);
  CHECK(p.deadline() == ms(650));
  // Slightly late: the cadence holds.
  CHECK(p.on_deadline(ms(660), ms(10)) == Action::None);
  CHECK(p.deadline() == ms(800));
}

TEST_CASE("custom timing and restart", "[trace]") {
  jankbpf::TraceTiming t;
  t.bound_ns = ms(100);
  t.check_interval_ns = ms(50);
  t.max_checks = 2;
  t.capture_after_ns = ms(500);
  TracePlanner p(t);
  p.start(0);
  CHECK(p.on_deadline(ms(50), ms(100)) == Action::None);
  CHECK(p.on_deadline(ms(100), ms(100)) == Action::GaveUp);
  p.start(ms(1000));  // Done restarts
  CHECK(p.state() == State::Checking);
  CHECK(p.checks_done() == 0);
  CHECK(p.on_deadline(ms(1050), ms(101)) == Action::Triggered);
  p.start(ms(1060));  // ignored while capturing
  CHECK(p.state() == State::Capturing);
  CHECK(p.on_deadline(ms(1550)) == Action::Save);
  p.reset();
  CHECK(p.state() == State::Idle);
}
