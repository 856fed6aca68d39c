// Every userspace table jankbpf keeps per process, module or task has a
// bound, and what a bound drops is counted for the summary's `evictions`
// (issue 10, item 3): a run watching thousands of processes, or losing
// records in a full ring, must neither grow without end nor drop quietly.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "app/trace_keeper.h"
#include "outputs.h"
#include "logs/quota.h"
#include "stack/resolver.h"

using namespace jankbpf;
namespace fs = std::filesystem;

namespace {

using test::NullOutput;

std::string temp_dir() {
  char tmpl[] = "/tmp/jankbpf-bounds-XXXXXX";
  return ::mkdtemp(tmpl);
}

}  // namespace

TEST_CASE("resolver: processes past max_processes are evicted least recent first, and counted",
          "[bounds]") {
  // An empty /proc: prepare() keeps a session per pid even when its maps
  // cannot be read (a process that exited), so the bound must hold there too.
  std::string dir = temp_dir();
  stack::ResolverOptions o;
  o.proc_root = dir;
  o.max_processes = 3;
  o.raise_fd_limit = false;
  stack::Resolver r(o);
  for (pid_t pid = 100; pid < 110; ++pid) r.prepare(pid, Arch::X86_64);
  auto s = r.stats();
  CHECK(s.processes == 3);
  CHECK(s.process_evictions == 7);
  r.forget(109);  // an exit is not an eviction
  CHECK(r.stats().process_evictions == 7);
  CHECK(r.stats().processes == 2);
  fs::remove_all(dir);
}

TEST_CASE("quota: processes forgotten inside their window to stay under the bound are counted",
          "[bounds]") {
  QuotaPolicy p;
  p.max_processes = 100;
  ReportQuota q(p);
  for (pid_t pid = 1; pid <= 1000; ++pid) q.take_stack(ProcessKey{pid, 0}, "s", pid);
  CHECK(q.tracked() <= 100);
  CHECK(q.counts().evicted == 1000 - q.tracked());
  // Entries whose windows have all passed are dropped first, uncounted:
  // forgetting them changes no decision.
  const uint64_t before = q.counts().evicted;
  const int64_t later = 3LL * 24 * 3600 * 1000;
  for (pid_t pid = 2000; pid < 2050; ++pid) q.take_stack(ProcessKey{pid, 0}, "s", later + pid);
  CHECK(q.counts().evicted == before);
}

TEST_CASE("trace keeper: pending traces whose records never come are bounded and counted",
          "[bounds]") {
  // No ftrace instance (start() not called): every trigger finishes at once
  // with a note, which is all this needs -- the table, not the capture.
  std::string dir = temp_dir();
  NullOutput out;
  ReporterConfig rc;
  rc.log_dir = dir + "/logs";
  Reporter reporter(rc, out);
  TraceKeeper keeper(reporter);
  const uint64_t n = TraceKeeper::kMaxPending + 10;
  for (uint64_t seq = 1; seq <= n; ++seq) keeper.on_trigger(4242, 4242, seq, 1, 0);
  CHECK(keeper.evicted() == 10);
  // The oldest went; the newest are still there for their records.
  CHECK_FALSE(keeper.take(4242, 1));
  CHECK_FALSE(keeper.take(4242, 10));
  auto last = keeper.take(4242, n);
  REQUIRE(last);
  CHECK(last->done);
  CHECK_FALSE(last->note.empty());
  // With the table full again, a trigger seen twice replaces its own
  // entry, evicting nothing.
  keeper.on_trigger(4242, 4242, n, 1, 0);
  keeper.on_trigger(4242, 4242, 11, 1, 0);
  CHECK(keeper.evicted() == 10);
  CHECK(keeper.take(4242, 12));
  reporter.finish();
  fs::remove_all(dir);
}
