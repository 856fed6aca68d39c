// The reporter thread's stop: bounded whatever a job is doing, and stacks
// dropped (records kept) when time runs short.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <memory>
#include <filesystem>
#include <mutex>
#include <vector>

#include "app/reporter.h"
#include "outputs.h"

using namespace jankbpf;
namespace fs = std::filesystem;

namespace {

using test::CollectOutput;
using test::StuckOutput;

ReporterConfig config(const std::string& dir) {
  ReporterConfig rc;
  rc.log_dir = dir;
  return rc;
}

}  // namespace

TEST_CASE("reporter: a stuck job does not hold up the stop past its budget", "[reporter]") {
  char tmpl[] = "/tmp/jankbpf-reporter-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  StuckOutput out;  // a sink stuck in its write (a stalled pipe reader, a hung mount)
  {
    std::unique_lock hold(out.gate);
    Reporter r(config(dir + "/logs"), out);
    TaskRecord rec;
    rec.tid = 1;
    r.report(rec, {});
    usleep(50'000);  // the worker is in the job now
    auto t0 = std::chrono::steady_clock::now();
    CHECK_FALSE(r.finish(std::chrono::milliseconds(300)));
    auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took >= std::chrono::milliseconds(280));
    CHECK(took < std::chrono::milliseconds(600));
    CHECK(r.busy_with() == "reporting a task");
    hold.unlock();  // let it go, so the destructor can join
  }
  CHECK(out.tasks.size() == 1);
  fs::remove_all(dir);
}

TEST_CASE("reporter: a record waiting for its trace does not hold up the records after it", "[reporter]") {
  char tmpl[] = "/tmp/jankbpf-reporter-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  CollectOutput out;
  auto trace = std::make_shared<PendingTrace>();
  Reporter r(config(dir + "/logs"), out);
  TaskRecord traced;
  traced.proc.pid = traced.tid = 1;
  Reporter::TaskContext ctx;
  ctx.trace = trace;
  r.report(traced, ctx);
  TaskRecord same;  // the same process's next task: stays behind it
  same.proc.pid = 1;
  same.tid = 3;
  r.report(same, {});
  TaskRecord next;  // another process's: does not wait
  next.proc.pid = next.tid = 2;
  r.report(next, {});
  auto written = [&] {
    std::lock_guard lk(out.mu);
    std::vector<int> tids;
    for (auto& t : out.tasks) tids.push_back(t.tid);
    return tids;
  };
  for (int i = 0; i < 100 && written().empty(); ++i) usleep(10'000);
  CHECK(written() == std::vector<int>{2});  // the next record did not wait
  {
    std::lock_guard lk(trace->mu);
    trace->paths = {"/logs/trace-1.dat"};
  }
  trace->finish();
  for (int i = 0; i < 100 && written().size() < 3; ++i) usleep(10'000);
  REQUIRE(written() == std::vector<int>{2, 1, 3});
  CHECK(out.tasks[1].external_log == std::vector<std::string>{"/logs/trace-1.dat"});
  CHECK(out.tasks[2].external_log.empty());
  CHECK(r.finish(std::chrono::milliseconds(800)));
  fs::remove_all(dir);
}

TEST_CASE("reporter: out of time, a record whose trace never came is written without it", "[reporter]") {
  char tmpl[] = "/tmp/jankbpf-reporter-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  CollectOutput out;
  auto trace = std::make_shared<PendingTrace>();  // never finished
  {
    Reporter r(config(dir + "/logs"), out);
    TaskRecord rec;
    rec.tid = 1;
    Reporter::TaskContext ctx;
    ctx.trace = trace;
    r.report(rec, ctx);
    auto t0 = std::chrono::steady_clock::now();
    CHECK(r.finish(std::chrono::milliseconds(300)));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(400));
  }
  REQUIRE(out.tasks.size() == 1);
  CHECK(out.tasks[0].external_log.empty());
  CHECK(out.tasks[0].trace_note.find("not saved") != std::string::npos);
  trace->finish();  // nobody is woken: the reporter is gone
  fs::remove_all(dir);
}

TEST_CASE("reporter: an idle reporter finishes at once within its budget", "[reporter]") {
  char tmpl[] = "/tmp/jankbpf-reporter-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  CollectOutput out;
  Reporter r(config(dir + "/logs"), out);
  TaskRecord rec;
  rec.tid = 1;
  r.report(rec, {});
  auto t0 = std::chrono::steady_clock::now();
  CHECK(r.finish(std::chrono::milliseconds(800)));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(300));
  CHECK(out.tasks.size() == 1);
  fs::remove_all(dir);
}

TEST_CASE("reporter: a job that throws is counted and skipped, the next one runs", "[reporter]") {
  char tmpl[] = "/tmp/jankbpf-reporter-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  struct ThrowOnce : CollectOutput {
    bool thrown = false;
    void emit(const TaskRecord& r) override {
      if (!thrown) {
        thrown = true;
        throw std::bad_alloc();  // as a hostile ELF's allocation would
      }
      CollectOutput::emit(r);
    }
  } out;
  {
    Reporter r(config(dir + "/logs"), out);
    TaskRecord rec;
    rec.tid = 1;
    r.report(rec, {});
    rec.tid = 2;
    r.report(rec, {});
    REQUIRE(r.finish(std::chrono::milliseconds(2000)));
    CHECK(r.stats().failed_jobs == 1);
  }
  REQUIRE(out.tasks.size() == 1);
  CHECK(out.tasks[0].tid == 2);
  fs::remove_all(dir);
}

TEST_CASE("reporter: stacks of threads never reported are bounded and evictions counted", "[reporter]") {
  char tmpl[] = "/tmp/jankbpf-reporter-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  CollectOutput out;
  ReporterStats st;
  const int kThreads = 4096 + 500;  // a fork loop: every thread new, none reported
  {
    Reporter r(config(dir + "/logs"), out);
    auto e = std::make_unique<jb_offcpu_event>();
    for (int i = 0; i < kThreads; i++) {
      std::memset(e.get(), 0, sizeof *e);
      e->hdr.type = JB_EV_OFFCPU;
      e->hdr.pid = e->hdr.tid = static_cast<uint32_t>(3'000'000 + i);  // no such process
      e->hdr.time_ns = 1'000'000ull * static_cast<uint64_t>(i + 1);
      r.add_offcpu(*e);
      if (i % 500 == 499) usleep(200'000);  // stay under the queue's bound
    }
    REQUIRE(r.finish(std::chrono::milliseconds(30000)));
    st = r.stats();
  }
  const uint64_t processed = kThreads - st.dropped;
  INFO("dropped " << st.dropped);
  REQUIRE(processed > 4096);
  CHECK(st.evicted_threads == processed - 4096);
  fs::remove_all(dir);
}

TEST_CASE("reporter: records queued behind a blocked output are bounded and counted", "[reporter]") {
  char tmpl[] = "/tmp/jankbpf-reporter-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  StuckOutput out;
  const size_t n = 70000;
  size_t written = 0;
  uint64_t dropped = 0;
  {
    std::unique_lock hold(out.gate);
    Reporter r(config(dir + "/logs"), out);
    TaskRecord rec;
    rec.tid = 1;
    r.report(rec, {});
    usleep(50'000);  // the worker is stuck writing the first
    for (size_t i = 1; i < n; ++i) r.report(rec, {});
    dropped = r.stats().records_dropped;
    hold.unlock();
    REQUIRE(r.finish());
  }
  written = out.tasks.size();
  // 65,536 waited; the rest were dropped, and every one is accounted for.
  CHECK(dropped == n - 1 - 65536);
  CHECK(written + dropped == n);
  fs::remove_all(dir);
}
