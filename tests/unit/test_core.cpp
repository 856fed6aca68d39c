// Unit tests for the core: option parsing, record rendering, /proc parsing,
// the per-arch table and kernel-event conversion.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <thread>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/record_builder.h"
#include "arch/arch.h"
#include "bpf/hooks.h"
#include "jankbpf/hooks.h"
#include "cli/options.h"
#include "elf/build_id.h"
#include "output/output.h"
#include "proc/process_info.h"
#include "util/clock.h"

using namespace jankbpf;

namespace {

ParseOutcome parse(std::vector<std::string> args) {
  args.insert(args.begin(), "jankbpf");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_options(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("defaults follow the seed", "[cli]") {
  auto r = parse({});
  REQUIRE(r.options);
  CHECK(r.options->threshold_ms == 150);
  CHECK(r.options->trace_threshold_ms == 450);
  CHECK(r.options->hang_ms == 3000);
  CHECK(r.options->jank.ignore_startup_time_s == 10);
  CHECK(r.options->threads == ThreadScope::Main);
  CHECK(r.options->offcpu_rate == 100);
  CHECK(r.options->system_wide());
  auto unlimited = parse({"--offcpu-rate", "0"});
  REQUIRE(unlimited.options);
  CHECK(unlimited.options->offcpu_rate == 0);
}

TEST_CASE("targets and values parse", "[cli]") {
  auto r = parse({"--pid", "1", "--pid", "2", "--threshold", "100", "--threads", "all",
                  "--ignore-startup-time", "3", "--duration", "1.5", "-vv"});
  REQUIRE(r.options);
  CHECK(r.options->pids == std::vector<pid_t>{1, 2});
  CHECK(r.options->threshold_ms == 100);
  CHECK(r.options->threads == ThreadScope::All);
  CHECK(r.options->jank.ignore_startup_time_s == 3);
  CHECK(*r.options->duration_s == Approx(1.5));
  CHECK(r.options->verbosity == 2);
  CHECK_FALSE(r.options->system_wide());

  auto c = parse({"--", "sleep", "--pid", "1"});
  REQUIRE(c.options);
  CHECK(c.options->command == std::vector<std::string>{"sleep", "--pid", "1"});
  CHECK(c.options->pids.empty());
}

TEST_CASE("bad usage exits 2 with a message naming the problem", "[cli]") {
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  std::vector<Case> cases = {
      {{"--ignore-startup-time", "2"}, "--ignore-startup-time"},
      {{"--threshold", "0"}, "--threshold"},
      {{"--threshold", "abc"}, "--threshold"},
      {{"--threads", "some"}, "--threads"},
      {{"--pid", "-5"}, "--pid"},
      {{"--pid", "1", "--comm", "x"}, "excludes"},
      {{"--pid", "1", "--", "true"}, "--pid excludes -- CMD"},
      {{"--comm", "x", "--", "true"}, "--comm excludes -- CMD"},
      {{"--threshold", "500", "--trace-threshold", "450"}, "--trace-threshold"},
      {{"--comm", "a-very-long-process-name"}, "15 characters"},
      {{"--duration", "0"}, "--duration"},
      {{"--offcpu-rate", "100001"}, "--offcpu-rate"},
      {{"--offcpu-rate", "-1"}, "--offcpu-rate"},
      {{"--offcpu-rate", "many"}, "--offcpu-rate"},
      {{"--bogus"}, "unknown option '--bogus'"},
      // A misspelt flag is unknown, never a command (it was once run as one).
      {{"--pid", "1", "--treshold", "100"}, "unknown option '--treshold' (did you mean --threshold?)"},
      {{"--treshold=100"}, "unknown option '--treshold' (did you mean --threshold?)"},
      {{"--pid", "1", "foo"}, "unexpected argument 'foo': a command to run goes after '--'"},
      {{"sleep", "1"}, "unexpected argument 'sleep': a command to run goes after '--'"},
      {{"--"}, "'--' must be followed by a command to run"},
  };
  for (auto& c : cases) {
    INFO(c.args[0]);
    auto r = parse(c.args);
    CHECK_FALSE(r.options);
    CHECK(r.exit_code == kExitUsage);
    CHECK(r.message_is_error);
    INFO(r.message);
    CHECK(r.message.find(c.needle) != std::string::npos);
  }
}

TEST_CASE("--help and --version exit 0", "[cli]") {
  auto h = parse({"--help"});
  CHECK_FALSE(h.options);
  CHECK(h.exit_code == 0);
  CHECK(h.message.find("--threshold") != std::string::npos);
  CHECK(h.message.find("Examples") != std::string::npos);
  auto v = parse({"--version"});
  CHECK(v.exit_code == 0);
  CHECK(v.message.rfind("jankbpf ", 0) == 0);
}

TEST_CASE("a jank record renders every documented field", "[output]") {
  TaskRecord r;
  r.time_ms = 1700000000123;
  r.proc.pid = 42;
  r.proc.name = "app\xff";  // invalid UTF-8 must not throw
  r.tid = 42;
  r.begin_time_ms = 1700000000000;
  r.end_time_ms = 1700000000123;
  r.duration_ms = 123.4567;
  r.state.running_ms = 100.0004;
  auto j = nlohmann::json::parse(to_json_line(r));
  for (const char* key : {"type", "time", "pid", "tid", "uid", "bundle_name", "bundle_version", "exe",
                          "thread_name", "begin_time", "end_time", "duration_ms", "threshold_ms",
                          "state_ms", "wait_syscall", "cgroup", "app_start_jiffies_time",
                          "external_log", "log_over_limit", "heaviest_stack"})
    CHECK(j.contains(key));
  CHECK(j["type"] == "jank");
  CHECK(j["duration_ms"].get<double>() == Approx(123.457));
  CHECK(j["state_ms"]["running"].get<double>() == Approx(100.0));
  CHECK(j["external_log"].is_array());

  r.kind = TaskRecord::Kind::Hang;
  auto h = nlohmann::json::parse(to_json_line(r));
  CHECK(h["type"] == "hang");
  CHECK_FALSE(h.contains("end_time"));
}

TEST_CASE("exit and summary records", "[output]") {
  ExitRecord e;
  e.pid = 7;
  e.exit_code = 3;
  auto j = nlohmann::json::parse(to_json_line(e));
  CHECK(j["type"] == "exit");
  CHECK(j["exit_code"] == 3);
  // Each kernel counter under its record name; lost_events is both rings'.
  SummaryRecord s;
  uint64_t n = 1;
#define JB_STAT_SET(id, field, meaning) s.kernel.field = n++;
  JB_STATS(JB_STAT_SET)
#undef JB_STAT_SET
  s.bpf.push_back({"p", 1, 2});
  s.bpf.push_back({"q", 5, 6, 3});
  s.bpf.push_back({"r", 7, 8, 4});
  auto k = nlohmann::json::parse(to_json_line(s));
  CHECK(k["type"] == "summary");
  // Skipped hook runs: per program only when not 0, and their sum.
  CHECK(!k["bpf"][0].contains("recursion_misses"));
  CHECK(k["bpf"][1]["recursion_misses"] == 3);
  CHECK(k["hook_runs_missed"] == 7);
  CHECK(k["tasks_checked"] == s.kernel.tasks);
  CHECK(k["lost_events"] == s.kernel.ringbuf_drops + s.kernel.offcpu_ring_full);
  CHECK(k["threads_untracked"] == s.kernel.threads_map_full);
  CHECK(k["timer_failures"] == s.kernel.timer_failures);
  CHECK(k["unseen_switches"] == s.kernel.unseen_switches);
  CHECK(k["samples"] == s.kernel.samples);
  CHECK(k["offcpu_captures"] == s.kernel.offcpu);
  CHECK(k["offcpu_stash_full"] == s.kernel.stash_full);
  CHECK(k["procs_untracked"] == s.kernel.procs_full);
  CHECK(k["scan_set_full"] == s.kernel.scan_full);
  CHECK(k["offcpu_ring_full"] == s.kernel.offcpu_ring_full);
  CHECK(k["offcpu_rate_limited"] == s.kernel.offcpu_rate_limited);
  CHECK(k["timers_map_full"] == s.kernel.timers_map_full);
  CHECK(k["bpf"][0]["name"] == "p");
}

TEST_CASE("--output refuses to write through a symlink", "[output]") {
  char dir[] = "/tmp/jankbpf-test-XXXXXX";
  REQUIRE(mkdtemp(dir));
  std::string target = std::string(dir) + "/target", link = std::string(dir) + "/out.jsonl";
  REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
  std::string error;
  CHECK_FALSE(JsonLinesOutput::open(link, &error));
  CHECK(error.find("symlink") != std::string::npos);
  CHECK(access(target.c_str(), F_OK) != 0);
  unlink(link.c_str());
  rmdir(dir);
}

TEST_CASE("cgroup v2 line is found among v1 lines and junk", "[proc]") {
  CHECK(parse_cgroup_v2("12:cpu:/x\n0::/system.slice/redis.service\n") == "/system.slice/redis.service");
  CHECK(parse_cgroup_v2("0::/\n") == "/");
  CHECK(parse_cgroup_v2("garbage") == "");
  CHECK(parse_cgroup_v2("") == "");
}

TEST_CASE("this process's identity from /proc", "[proc]") {
  pid_t self = getpid();
  CHECK(process_exists(self));
  CHECK_FALSE(process_exists(0));
  CHECK(read_comm(self).size() > 0);
  // The kernel's own link, not a name: check-arm64.sh starts this binary
  // through ld.so under qemu-user, and then ld.so is the executable.
  CHECK(read_exe_path(self) == std::filesystem::read_symlink("/proc/self/exe").string());
  CHECK(read_uid(self) == static_cast<long>(getuid()));
  ExeCache cache;
  auto exe = cache.lookup(self);
  CHECK(exe.build_id.size() >= 16);  // gcc/ld emit a build-id by default
  CHECK(cache.lookup(self).build_id == exe.build_id);
}

namespace {
size_t open_fds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) n++;
  return n;
}
}  // namespace

TEST_CASE("an executable opened on one thread has its build-id read on another, descriptors bounded", "[proc]") {
  const std::string want = ExeCache().lookup(getpid()).build_id;
  REQUIRE(want.size() >= 16);
  ExeCache cache;
  const size_t before = open_fds();
  std::vector<ExeFile> files;
  // Nothing read yet: each open holds its file, up to the cap; past it the
  // build-id is read at once instead of holding another descriptor.
  for (int i = 0; i < ExeCache::kMaxHeldOpen + 20; i++) files.push_back(cache.open(getpid()));
  CHECK(open_fds() <= before + ExeCache::kMaxHeldOpen);
  CHECK(open_fds() >= before + ExeCache::kMaxHeldOpen / 2);
  std::string got;
  std::thread reader([&] {
    for (auto& f : files) {
      std::string id = f.build_id();
      if (got.empty()) got = id;
      CHECK(id == got);
    }
  });
  reader.join();
  CHECK(got == want);
  CHECK(open_fds() == before);  // read files give their descriptor back
  // Now known: a new open carries it without reading or holding the file.
  ExeFile again = cache.open(getpid());
  CHECK(open_fds() == before);
  CHECK(again.build_id() == want);
  // Files dropped unread give their slots back too.
  for (int i = 0; i < 10; i++) ExeCache().open(getpid());
  CHECK(open_fds() == before);
}

TEST_CASE("build-id of non-ELF and truncated files is empty, not a crash", "[elf]") {
  char path[] = "/tmp/jankbpf-elf-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  CHECK(read_build_id(fd).empty());
  // A valid ELF header cut off after 64 bytes.
  int self = open("/proc/self/exe", O_RDONLY);
  char buf[64];
  REQUIRE(read(self, buf, sizeof buf) == sizeof buf);
  REQUIRE(write(fd, buf, sizeof buf) == sizeof buf);
  CHECK(read_build_id(fd).empty());
  close(self);
  close(fd);
  unlink(path);
}

TEST_CASE("per-arch wait syscall tables", "[arch]") {
  const auto& x86 = arch_info(Arch::X86_64);
  CHECK(x86.wait_syscalls.size() == 7);
  CHECK(x86.child_waits.size() == 2);
  const auto& arm = arch_info(Arch::Arm64);
  CHECK(arm.wait_syscalls.size() == 4);
  for (const auto& w : arm.wait_syscalls) CHECK(w.name != "epoll_wait");
  // Records name their wait from the table both sides share.
  CHECK(wait_name(JB_WAIT_epoll_wait) == "epoll_wait");
  CHECK(wait_name(JB_WAIT_pselect6) == "pselect6");
  CHECK(wait_name(JB_WAIT_wait4) == "wait4");
  CHECK(wait_name(JB_WAIT_NR).empty());
  CHECK(wait_id("ppoll") == JB_WAIT_ppoll);
  CHECK(wait_id("getppid") == JB_WAIT_NR);
  // The tracepoint programs name the wait by the syscall number: every wait
  // of this build's arch has one, inside the BPF side's table.
  CHECK(host_syscall_nr("ppoll") == SYS_ppoll);
  CHECK(host_syscall_nr("getppid") == -1);
  for (const auto* waits : {&host_arch().wait_syscalls, &host_arch().child_waits})
    for (const auto& w : *waits) {
      INFO(w.name);
      CHECK(host_syscall_nr(w.name) >= 0);
      CHECK(host_syscall_nr(w.name) < JB_MAX_SYSCALL_NR);
    }
  // Every wait an arch has is in the shared table.
  for (const auto* a : {&x86, &arm})
    for (const auto& w : a->wait_syscalls) {
      bool found = false;
      for (uint32_t id = 0; id < JB_WAIT_NR; id++) found |= wait_name(id) == w.name;
      CHECK(found);
    }
}

TEST_CASE("kernel events become records", "[record]") {
  EpochClock clock;
  RecordBuilder b(clock);
  jb_task_event e{};
  e.hdr.type = JB_EV_TASK_END;
  e.hdr.pid = e.hdr.tid = static_cast<uint32_t>(getpid());
  e.begin_ns = 1'000'000'000;
  e.end_ns = 1'200'123'456;
  e.state_ns[JB_ST_RUNNING] = 150'000'000;
  e.state_ns[JB_ST_BLOCKED] = 50'123'456;
  e.wait_syscall = JB_WAIT_epoll_pwait;
  e.threshold_ms = 150;
  e.flags = JB_TASKF_CROSSED;
  memcpy(e.comm, "0123456789abcdef", 16);  // not NUL-terminated
  auto r = b.task(e);
  CHECK(r.thread_name == "0123456789abcdef");
  CHECK(r.duration_ms == Approx(200.123456));
  CHECK(r.state.running_ms + r.state.blocked_io_ms == Approx(r.duration_ms));
  CHECK(r.wait_syscall == "epoll_pwait");
  CHECK(r.seen_running);
  // Each instant is its own epoch millisecond, floored: 200.12 ms apart
  // they are 200 or 201 ms apart, by where the clocks' offset falls.
  CHECK(r.begin_time_ms == clock.epoch_ms(e.begin_ns));
  CHECK(r.end_time_ms == clock.epoch_ms(e.end_ns));
  CHECK(r.end_time_ms - r.begin_time_ms >= 200);
  CHECK(r.end_time_ms - r.begin_time_ms <= 201);

  jb_exit_event x{};
  x.hdr.type = JB_EV_EXIT;
  x.exit_code = 3 << 8;
  CHECK(b.exit(x).exit_code == 3);
  x.exit_code = 9;  // SIGKILL
  CHECK(b.exit(x).exit_code == 137);
}
