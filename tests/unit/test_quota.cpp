// Report quotas with an injected clock: the seed's once per process, up to
// report_times_per_app per day (per hour with --dev), traces once a day,
// and the duplicate-stack rule on top.
#include <catch2/catch.hpp>

#include "logs/quota.h"

using jankbpf::ProcessKey;
using jankbpf::QuotaPolicy;
using jankbpf::ReportQuota;
using jankbpf::Suppressed;
using jankbpf::suppressed_name;

namespace {
constexpr int64_t kHour = QuotaPolicy::kHourMs;
constexpr int64_t kDay = QuotaPolicy::kDayMs;
const ProcessKey kApp{100, 5555};
}  // namespace

TEST_CASE("suppression reasons have their record names", "[quota]") {
  CHECK(suppressed_name(Suppressed::None) == "");
  CHECK(suppressed_name(Suppressed::StackQuota) == "stack_quota");
  CHECK(suppressed_name(Suppressed::TraceQuota) == "trace_quota");
  CHECK(suppressed_name(Suppressed::DuplicateStack) == "duplicate_stack");
}

TEST_CASE("by default a process gets one stack report a day", "[quota]") {
  ReportQuota q;
  int64_t t = 1'000'000;
  CHECK(q.peek_stack(kApp, t) == Suppressed::None);
  CHECK(q.take_stack(kApp, "main;a;b", t) == Suppressed::None);
  CHECK(q.peek_stack(kApp, t + 1) == Suppressed::StackQuota);
  CHECK(q.take_stack(kApp, "main;c", t + 1) == Suppressed::StackQuota);
  CHECK(q.take_stack(kApp, "main;c", t + kDay - 1) == Suppressed::StackQuota);
  // The slot frees exactly one window after it was taken.
  CHECK(q.take_stack(kApp, "main;c", t + kDay) == Suppressed::None);
  CHECK(q.counts().stack_reports == 2);
  CHECK(q.counts().stack_quota == 2);
}

TEST_CASE("with --dev and report_times_per_app 3: three an hour, then suppression", "[quota]") {
  QuotaPolicy p;
  p.stack_reports = 3;
  p.dev = true;
  ReportQuota q(p);
  int64_t t = 50'000;
  CHECK(q.take_stack(kApp, "f1", t) == Suppressed::None);
  CHECK(q.take_stack(kApp, "f2", t + 1000) == Suppressed::None);
  CHECK(q.take_stack(kApp, "f3", t + 2000) == Suppressed::None);
  CHECK(q.take_stack(kApp, "f4", t + 3000) == Suppressed::StackQuota);
  CHECK(q.peek_stack(kApp, t + kHour - 1) == Suppressed::StackQuota);
  // One hour after the first, one slot is free again.
  CHECK(q.peek_stack(kApp, t + kHour) == Suppressed::None);
  CHECK(q.take_stack(kApp, "f5", t + kHour) == Suppressed::None);
  CHECK(q.take_stack(kApp, "f6", t + kHour + 1) == Suppressed::StackQuota);
}

TEST_CASE("without --dev report_times_per_app counts per day", "[quota]") {
  QuotaPolicy p;
  p.stack_reports = 3;
  ReportQuota q(p);
  for (int i = 0; i < 3; ++i) CHECK(q.take_stack(kApp, "f" + std::to_string(i), i) == Suppressed::None);
  CHECK(q.take_stack(kApp, "g", kHour * 2) == Suppressed::StackQuota);
  CHECK(q.take_stack(kApp, "g", kDay) == Suppressed::None);
}

TEST_CASE("the same heaviest path is not reported twice in the window", "[quota]") {
  QuotaPolicy p;
  p.stack_reports = 3;
  p.dev = true;
  ReportQuota q(p);
  CHECK(q.take_stack(kApp, "main;render;lock", 0) == Suppressed::None);
  CHECK(q.take_stack(kApp, "main;render;lock", 10) == Suppressed::DuplicateStack);
  // A duplicate takes no slot: two different stacks still fit.
  CHECK(q.take_stack(kApp, "main;io", 20) == Suppressed::None);
  CHECK(q.take_stack(kApp, "main;gc", 30) == Suppressed::None);
  // Quota out and a duplicate: the duplicate is the reason given.
  CHECK(q.take_stack(kApp, "main;io", 40) == Suppressed::DuplicateStack);
  CHECK(q.take_stack(kApp, "main;new", 40) == Suppressed::StackQuota);
  // Past the window the same path may be reported again.
  CHECK(q.take_stack(kApp, "main;render;lock", kHour) == Suppressed::None);
  // Another process with the same path is not a duplicate.
  CHECK(q.take_stack(ProcessKey{101, 1}, "main;render;lock", kHour) == Suppressed::None);
  // No stack (unwinding failed): never a duplicate.
  ReportQuota q2(p);
  CHECK(q2.take_stack(kApp, "", 0) == Suppressed::None);
  CHECK(q2.take_stack(kApp, "", 1) == Suppressed::None);
  CHECK(q.counts().duplicate_stack == 2);
}

TEST_CASE("the dedupe window can be shortened or turned off", "[quota]") {
  QuotaPolicy p;
  p.stack_reports = 3;
  p.dedupe_window_ms = 1000;
  ReportQuota q(p);
  CHECK(q.take_stack(kApp, "same", 0) == Suppressed::None);
  CHECK(q.take_stack(kApp, "same", 999) == Suppressed::DuplicateStack);
  CHECK(q.take_stack(kApp, "same", 1000) == Suppressed::None);
  p.dedupe_window_ms = 0;
  ReportQuota off(p);
  CHECK(off.take_stack(kApp, "same", 0) == Suppressed::None);
  CHECK(off.take_stack(kApp, "same", 1) == Suppressed::None);
}

TEST_CASE("traces: once per process per day, --dev or not", "[quota]") {
  for (bool dev : {false, true}) {
    QuotaPolicy p;
    p.dev = dev;
    p.stack_reports = 3;
    ReportQuota q(p);
    CHECK(q.peek_trace(kApp, 0) == Suppressed::None);
    CHECK(q.take_trace(kApp, 0) == Suppressed::None);
    CHECK(q.peek_trace(kApp, kHour) == Suppressed::TraceQuota);
    CHECK(q.take_trace(kApp, kDay - 1) == Suppressed::TraceQuota);
    CHECK(q.take_trace(kApp, kDay) == Suppressed::None);
    // Stack and trace quotas are separate.
    CHECK(q.take_stack(kApp, "x", kDay) == Suppressed::None);
    CHECK(q.counts().trace_quota == 1);
  }
}

TEST_CASE("a recycled pid is a new process", "[quota]") {
  ReportQuota q;
  CHECK(q.take_stack(ProcessKey{300, 1}, "a", 0) == Suppressed::None);
  CHECK(q.take_trace(ProcessKey{300, 1}, 0) == Suppressed::None);
  CHECK(q.peek_stack(ProcessKey{300, 2}, 1) == Suppressed::None);
  CHECK(q.take_stack(ProcessKey{300, 2}, "a", 1) == Suppressed::None);
  CHECK(q.take_trace(ProcessKey{300, 2}, 1) == Suppressed::None);
  q.forget(300);
  CHECK(q.tracked() == 0);
}

TEST_CASE("memory stays bounded with many processes", "[quota]") {
  QuotaPolicy p;
  p.max_processes = 100;
  ReportQuota q(p);
  for (pid_t pid = 1; pid <= 1000; ++pid) q.take_stack(ProcessKey{pid, 0}, "s", pid);
  CHECK(q.tracked() <= 100);
  // The most recent ones are still remembered.
  CHECK(q.peek_stack(ProcessKey{1000, 0}, 1001) == Suppressed::StackQuota);
  // Entries whose windows have all passed go first.
  for (pid_t pid = 2000; pid < 2100; ++pid) q.take_stack(ProcessKey{pid, 0}, "s", kDay * 2 + pid);
  CHECK(q.tracked() <= 100);
  CHECK(q.peek_stack(ProcessKey{2099, 0}, kDay * 2 + 2100) == Suppressed::StackQuota);
}

TEST_CASE("a stack report given back (its log could not be written) spends no quota", "[quota]") {
  QuotaPolicy p;
  p.stack_reports = 1;
  ReportQuota q(p);
  const ProcessKey k{500, 9};
  REQUIRE(q.take_stack(k, "a;b", 10) == Suppressed::None);
  q.give_back_stack(k, "a;b", 10);
  CHECK(q.counts().stack_reports == 0);
  // The same stack is no duplicate, and the quota is whole again.
  CHECK(q.take_stack(k, "a;b", 20) == Suppressed::None);
  CHECK(q.take_stack(k, "c;d", 30) == Suppressed::StackQuota);
  // Another process's, or another start time's, give-back changes nothing.
  q.give_back_stack(ProcessKey{500, 8}, "a;b", 20);
  q.give_back_stack(ProcessKey{501, 9}, "a;b", 20);
  CHECK(q.take_stack(k, "c;d", 40) == Suppressed::StackQuota);
}
