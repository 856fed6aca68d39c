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

using namespace jankbpf;
namespace fs = std::filesystem;

namespace {

struct CollectOutput : Output {
  std::mutex mu;
  std::vector<TaskRecord> tasks;
  void emit(const TaskRecord& r) override {
    std::lock_guard lk(mu);
    tasks.push_back(r);
  }
  void emit(const ExitRecord&) override {}
  void emit(const SummaryRecord&) override {}
};

ReporterConfig config(const std::string& dir) {
  ReporterConfig rc;
  rc.log_dir = dir;
  return rc;
}

}  // namespace

TEST_CASE("reporter: a stuck job does not hold up the stop past its budget", "[reporter]") {
  char tmpl[] = "/tmp/jankbpf-reporter-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  CollectOutput out;
  auto trace = std::make_shared<PendingTrace>();  // never finished: the job waits on it
  {
    Reporter r(config(dir + "/logs"), out);
    TaskRecord rec;
    rec.tid = 1;
    Reporter::TaskContext ctx;
    ctx.trace = trace;
    r.report(rec, ctx);
    usleep(50'000);  // the worker is in the job now
    auto t0 = std::chrono::steady_clock::now();
    CHECK_FALSE(r.finish(std::chrono::milliseconds(300)));
    auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took >= std::chrono::milliseconds(280));
    CHECK(took < std::chrono::milliseconds(600));
    CHECK(r.busy_with() == "reporting a task");
    trace->finish();  // let it go, so the destructor can join
  }
  CHECK(out.tasks.size() == 1);
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
