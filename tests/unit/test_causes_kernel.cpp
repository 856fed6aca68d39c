// Unit tests for the kernel causes (src/cause/kernel_causes.*, kernel_names.*):
// kernel_lock, reclaim and compaction slices from the kernel's evidence into
// the record (the lock's name, class, owner and its stack; the memcg; the
// windows' on-CPU time), the why line, and the kallsyms data-symbol parser.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "cause/attribute.h"
#include "cause/evidence.h"
#include "cause/identity.h"
#include "cause/kernel_names.h"
#include "cause/stack_source.h"
#include "output/output.h"

using namespace jankbpf;
using namespace jankbpf::cause;

namespace {

constexpr pid_t kPid = 100, kTid = 100;

struct KernelIds : Identities {
  std::string thread_comm(pid_t, pid_t) override { return ""; }
  bool thread_in(pid_t, pid_t) override { return false; }
  std::string fd_path(pid_t, int) override { return ""; }
  std::string address_where(pid_t, uint64_t) override { return ""; }
  CgroupInfo cgroup(uint64_t id, uint32_t h) override {
    return id == 55 && h == 4 ? CgroupInfo{"/app/limited", "cgroup (memory)", ""} : CgroupInfo{};
  }
  std::string kernel_text(uint64_t a) override {
    return a == 0x10 ? "__schedule+0x10" : a == 0x20 ? "change_protection+0x6fd" : "mprotect_fixup+0x12d";
  }
  std::string kernel_object(uint64_t a) override { return a == 0xffffffff82000040 ? "rtnl_mutex" : ""; }
};

TaskRecord record(double running, double runnable, double sleeping) {
  TaskRecord r;
  r.proc.pid = kPid;
  r.tid = kTid;
  r.state = {running, runnable, sleeping, 0};
  r.duration_ms = running + runnable + sleeping;
  return r;
}

jb_cause_event event() {
  jb_cause_event e{};
  e.hdr.type = JB_EV_CAUSE;
  e.hdr.pid = kPid;
  e.hdr.tid = kTid;
  e.seq = 3;
  return e;
}

jb_cause_slice& add(jb_cause_event& e, uint32_t kind, double ms, uint64_t key = 0) {
  jb_cause_slice& s = e.slices[e.nslices++];
  s.kind = kind;
  s.key = key;
  s.ns = static_cast<uint64_t>(ms * 1e6);
  s.max_ns = s.ns;
  s.count = 1;
  s.nr = -1;
  e.kind_ns[kind] += s.ns;
  return s;
}

// rtnl_mutex (a static lock, by its symbol) held by ip[301], whose stack
// the kernel gave as `owner_frames`.
jb_cause_slice& add_rtnl_held(jb_cause_event& e, double ms, int32_t owner_frames) {
  auto& s = add(e, JB_CAUSE_KERNEL_LOCK, ms, 0xffffffff82000040);
  s.klock.addr = 0xffffffff82000040;
  s.klock.flags = JB_LCB_MUTEX | JB_KLF_OWNER;
  s.klock.owner_pid = 300;
  s.klock.owner_tid = 301;
  strcpy(s.klock.owner_comm, "ip");
  s.klock.owner_frames = owner_frames;
  return s;
}

}  // namespace

TEST_CASE("kernel_lock names mmap_lock, its class and mode, the owner and what it ran", "[causes]") {
  KernelIds ids;
  CollectedStacks stacks;
  auto e = event();
  auto& s = add(e, JB_CAUSE_KERNEL_LOCK, 90, 0xffff888012345678);
  s.klock.addr = 0xffff888012345678;
  s.klock.flags = JB_LCB_READ | JB_KLF_MMAP | JB_KLF_OWNER;
  s.klock.owner_pid = kPid;
  s.klock.owner_tid = 101;
  strcpy(s.klock.owner_comm, "mmapw");
  s.klock.owner_frames = 3;
  s.klock.owner_stack[0] = 0x10;
  s.klock.owner_stack[1] = 0x20;
  s.klock.owner_stack[2] = 0x30;
  e.win_ns[JB_CAUSE_KERNEL_LOCK] = 95'000'000;
  e.win_count[JB_CAUSE_KERNEL_LOCK] = 1;
  Evidence ev;
  ev.causes = e;
  auto r = record(5, 0, 90);
  attribute(r, ev, true, ids, stacks);
  REQUIRE(r.cause.size() == 1);
  const auto& c = r.cause[0];
  CHECK(c.kind == "kernel_lock");
  CHECK((c.lock_name == "mmap_lock" && c.lock_class == "rwsem" && c.lock_mode == "read"));
  REQUIRE(c.owner);
  CHECK((c.owner->tid == 101 && c.owner->comm == "mmapw" && !c.owner->verified));
  CHECK(c.owner_kernel_stack.size() == 3);
  CHECK(c.window_ms == Approx(95));
  CHECK(r.why == "90 ms on kernel lock mmap_lock (rwsem read) held by mmapw[101] in change_protection");
  // Rendered, with its on-CPU part.
  auto j = nlohmann::json::parse(to_json_line(r));
  const auto& jc = j["cause"][0];
  CHECK(jc["lock"] == "mmap_lock");
  CHECK(jc["owner_kernel_stack"].size() == 3);
  CHECK(jc["on_cpu_ms"].get<double>() == Approx(5));
}

TEST_CASE("kernel_lock: a static lock by its symbol, no owner stack said why", "[causes]") {
  KernelIds ids;
  CollectedStacks stacks;
  auto e = event();
  add_rtnl_held(e, 40, -95);
  auto& u = add(e, JB_CAUSE_KERNEL_LOCK, 4, 0xffff888000000100);
  u.klock.addr = 0xffff888000000100;
  u.klock.flags = JB_LCB_SPIN;  // no owner recorded, no symbol
  Evidence ev;
  ev.causes = e;
  auto r = record(0, 0, 44);
  attribute(r, ev, true, ids, stacks);
  REQUIRE(r.cause.size() == 2);
  CHECK((r.cause[0].lock_name == "rtnl_mutex" && r.cause[0].lock_class == "mutex" && r.cause[0].lock_mode.empty()));
  CHECK(r.cause[0].owner_kernel_stack.empty());
  CHECK(r.cause[0].owner_stack_missing.find("bpf_task_from_pid") != std::string::npos);
  CHECK(r.cause[0].window_ms < 0);  // no window time known
  CHECK((r.cause[1].lock_name.empty() && r.cause[1].lock_class == "spinlock" && !r.cause[1].owner));
  CHECK(r.why == "40 ms on kernel lock rtnl_mutex (mutex) held by ip[301]");
}

TEST_CASE("kernel_lock: an owner stack's error of INT_MIN is said, not negated as an int", "[causes][fuzz]") {
  // fuzz_causes (2026-12-06, UBSan): "negation of -2147483648 cannot be
  // represented in type '__s32'" -- a forged record's owner_frames.
  KernelIds ids;
  CollectedStacks stacks;
  auto e = event();
  add_rtnl_held(e, 40, INT32_MIN);
  Evidence ev;
  ev.causes = e;
  auto r = record(0, 0, 40);
  attribute(r, ev, true, ids, stacks);
  REQUIRE(r.cause.size() == 1);
  CHECK(r.cause[0].owner_stack_missing == "bpf_get_task_stack failed: errno 2147483648");
}

TEST_CASE("reclaim names the memcg; windows all on the CPU still make a slice of 0 ms", "[causes]") {
  KernelIds ids;
  CollectedStacks stacks;
  auto e = event();
  add(e, JB_CAUSE_RUNNABLE, 20);
  e.win_ns[JB_CAUSE_RECLAIM] = 3'500'000;
  e.win_count[JB_CAUSE_RECLAIM] = 12;
  e.reclaim_memcg = 1;
  e.reclaim_cgroup_id = 55;
  e.reclaim_hierarchy_id = 4;
  // Compaction, asleep for part of it (migration waits).
  auto& k = add(e, JB_CAUSE_COMPACTION, 30);
  k.flags = JB_CSF_BLOCKED;
  e.win_ns[JB_CAUSE_COMPACTION] = 50'000'000;
  e.win_count[JB_CAUSE_COMPACTION] = 2;
  Evidence ev;
  ev.causes = e;
  auto r = record(100, 20, 30);
  attribute(r, ev, true, ids, stacks);
  REQUIRE(r.cause.size() == 3);
  double sum = 0;
  for (const auto& c : r.cause) sum += c.ms;
  CHECK(sum == Approx(50));  // still exactly the non-running time
  const CauseSlice* rec = nullptr;
  for (const auto& c : r.cause)
    if (c.kind == "reclaim") rec = &c;
  REQUIRE(rec);
  CHECK((rec->ms == 0 && rec->memcg_reclaim && rec->cgroup == "/app/limited" && rec->cgroup_fs == "cgroup (memory)"));
  CHECK((rec->window_ms == Approx(3.5) && rec->windows == 12));
  CHECK(r.cause[0].kind == "compaction");
  CHECK(r.why.find("30 ms in direct compaction (50 ms inside it, 20 ms running)") != std::string::npos);
  auto j = nlohmann::json::parse(to_json_line(r));
  bool seen = false;
  for (const auto& c : j["cause"])
    if (c["kind"] == "reclaim") {
      seen = true;
      CHECK(c["memcg"] == true);
      CHECK(c["cgroup"] == "/app/limited");
      CHECK(c["on_cpu_ms"].get<double>() == Approx(3.5));
    }
  CHECK(seen);
}

TEST_CASE("lock classes from the kernel's contention flags", "[causes]") {
  CHECK(lock_class(JB_LCB_READ) == "rwsem");
  CHECK(lock_mode(JB_LCB_WRITE) == "write");
  CHECK(lock_class(JB_LCB_MUTEX | JB_LCB_SPIN) == "mutex");
  CHECK(lock_class(JB_LCB_SPIN) == "spinlock");
  CHECK(lock_class(JB_LCB_SPIN | JB_LCB_WRITE) == "rwlock");
  CHECK(lock_class(JB_LCB_PERCPU | JB_LCB_READ) == "percpu_rwsem");
  CHECK(lock_class(JB_LCB_RT) == "rtmutex");
  CHECK(lock_class(0) == "semaphore");
}

TEST_CASE("kallsyms data symbols: locks by name, text and junk skipped", "[causes]") {
  const std::string text =
      "ffffffff81000000 T _text\n"
      "ffffffff82000040 D rtnl_mutex\n"
      "ffffffff82000100 b cgroup_mutex\n"
      "zzzz D junk\n"
      "ffffffff82000200 d\n"
      "ffffffff82001000 D mod_lock\t[somemod]\n"
      "ffffffff82000180 T text_in_data_range\n"
      "\n";
  auto k = KernelObjects::parse(text);
  CHECK(k.size() == 3);
  CHECK(k.name_of(0xffffffff82000040) == "rtnl_mutex");
  CHECK(k.name_of(0xffffffff82000048) == "rtnl_mutex+0x8");
  CHECK(k.name_of(0xffffffff82000180) == "cgroup_mutex+0x80");
  CHECK(k.name_of(0xffffffff82001000) == "mod_lock");
  CHECK(k.name_of(0xffffffff81000000).empty());
  CHECK(k.name_of(0xffffffff82001000 + 70000).empty());
}
