// Unit tests for src/cause/: attribution of the kernel's slices into the
// typed model (exclusive, summing to the non-running time, claims checked,
// interrupts never blamed), the one-line why, the /proc and kallsyms
// parsers behind the identities, the evidence store's bounds.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cause/attribute.h"
#include "cause/evidence.h"
#include "cause/identity.h"
#include "cause/irq_text.h"
#include "cause/stack_source.h"
#include "cause/syscalls.h"
#include "cause/why.h"
#include "output/output.h"

using namespace jankbpf;
using namespace jankbpf::cause;

namespace {

constexpr pid_t kPid = 100, kTid = 100;

// /proc as a test says it is.
struct FakeIds : Identities {
  std::map<pid_t, std::string> threads;  // threads of kPid
  std::map<int, std::string> fds;
  std::map<uint64_t, std::string> where;
  std::vector<std::pair<pid_t, pid_t>> asked;  // thread_in questions
  std::string thread_comm(pid_t pid, pid_t tid) override {
    if (pid != kPid) return "";
    auto it = threads.find(tid);
    return it == threads.end() ? "" : it->second;
  }
  bool thread_in(pid_t pid, pid_t tid) override {
    asked.push_back({pid, tid});
    return pid == kPid && threads.count(tid);
  }
  std::string fd_path(pid_t, int fd) override { return fds.count(fd) ? fds[fd] : ""; }
  std::string address_where(pid_t, uint64_t a) override { return where.count(a) ? where[a] : ""; }
  CgroupInfo cgroup(uint64_t id, uint32_t h) override {
    return id == 77 && h == 1 ? CgroupInfo{"/jt-quota", "cgroup (cpu)", "20000/100000"} : CgroupInfo{};
  }
};

stack::ResolvedStack user_stack(std::vector<std::string> syms, std::string module = "/srv/app") {
  stack::ResolvedStack s;
  for (auto& name : syms) {
    stack::Frame f;
    f.module = module;
    f.symbol = name;
    f.file = "/src/app.c";
    f.line = 41;
    s.frames.push_back(f);
  }
  return s;
}

TaskRecord record(double running, double runnable, double sleeping, double blocked = 0) {
  TaskRecord r;
  r.proc.pid = kPid;
  r.tid = kTid;
  r.state = {running, runnable, sleeping, blocked};
  r.duration_ms = running + runnable + sleeping + blocked;
  return r;
}

jb_cause_event event() {
  jb_cause_event e{};
  e.hdr.type = JB_EV_CAUSE;
  e.hdr.pid = kPid;
  e.hdr.tid = kTid;
  e.seq = 7;
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

void woken_by(jb_cause_slice& s, pid_t pid, pid_t tid, const char* comm) {
  s.flags |= JB_CSF_WOKEN;
  s.waker_pid = pid;
  s.waker_tid = tid;
  strncpy(s.waker_comm, comm, sizeof s.waker_comm - 1);
}

double total(const TaskRecord& r) {
  double t = 0;
  for (const auto& c : r.cause) t += c.ms;
  return t;
}

long nr_of(const char* name) {
  for (long nr = 0; nr < 512; nr++)
    if (syscall_name(nr) == name) return nr;
  return -1;
}

}  // namespace

TEST_CASE("a lock slice names its owner when the claim is a thread of the process that released it",
          "[causes]") {
  FakeIds ids;
  ids.threads = {{101, "holder"}};
  ids.where[0x5000] = "app+0x4040";
  auto e = event();
  auto& s = add(e, JB_CAUSE_LOCK, 400, 0x5000);
  s.arg0 = 0x5000;
  s.nr = nr_of("futex");
  s.flags = JB_CSF_FUTEX_WAIT | JB_CSF_CLAIM_READ;
  s.claim = 101;
  s.max_off_ns = 1000;
  woken_by(s, kPid, 101, "holder");
  Evidence ev;
  ev.causes = e;
  jb_subject_event sub{};
  sub.tid = 101;
  sub.pid = kPid;
  sub.role = JB_SUBJ_OWNER;
  sub.since_ns = 1000;
  sub.until_ns = 1000 + 400'000'000;
  sub.state_ns[JB_ST_RUNNING] = 390'000'000;
  sub.state_ns[JB_ST_RUNNABLE] = 10'000'000;
  sub.samples = 2;
  strcpy(sub.comm, "holder");
  ev.subjects.push_back(sub);
  CollectedStacks stacks;
  stacks.add_sample(101, 2000, user_stack({"crunch_a", "holder_main"}));
  stacks.add_sample(101, 3000, user_stack({"crunch_a", "holder_main"}));

  auto r = record(1, 0, 400);
  attribute(r, ev, true, ids, stacks);
  REQUIRE(r.cause.size() == 1);
  const auto& c = r.cause[0];
  CHECK(c.kind == "lock");
  CHECK(c.address == 0x5000);
  CHECK(c.address_where == "app+0x4040");
  REQUIRE(c.owner);
  CHECK(c.owner->tid == 101);
  CHECK(c.owner->comm == "holder");
  CHECK(c.owner->claim);
  CHECK(c.owner->verified);
  CHECK(c.owner->function == "crunch_a");
  CHECK(c.owner->state.running_ms == Approx(390));
  CHECK(r.why == "400 ms on mutex 0x5000 (app+0x4040) held by holder[101], which ran crunch_a (app.c:41) for 390 ms");
}

TEST_CASE("a claim that is no thread of the process is not believed: the waker is a peer", "[causes]") {
  FakeIds ids;  // 4242 is not a thread of kPid (another process's, or junk)
  auto e = event();
  auto& s = add(e, JB_CAUSE_LOCK, 300, 0x5000);
  s.arg0 = 0x5000;
  s.flags = JB_CSF_FUTEX_WAIT | JB_CSF_CLAIM_READ;
  s.claim = 4242;
  woken_by(s, kPid, 105, "worker");
  Evidence ev;
  ev.causes = e;
  CollectedStacks stacks;
  auto r = record(1, 0, 300);
  attribute(r, ev, true, ids, stacks);
  REQUIRE(r.cause.size() == 1);
  CHECK(r.cause[0].kind == "peer");
  CHECK(!r.cause[0].owner);
  REQUIRE(r.cause[0].waker);
  CHECK(r.cause[0].waker->tid == 105);
  CHECK(r.why.find("4242") == std::string::npos);
}

TEST_CASE("interrupt and kernel-thread wakers are never blamed", "[causes]") {
  FakeIds ids;
  auto e = event();
  auto& s = add(e, JB_CAUSE_OTHER, 200, 0);
  s.flags = JB_CSF_WOKEN | JB_CSF_IRQ;
  s.waker_tid = 999;  // the task the interrupt landed on
  auto& k = add(e, JB_CAUSE_OTHER, 100, 1ull << 32);
  woken_by(k, 0, 55, "kworker/0:1");
  k.flags |= JB_CSF_KTHREAD | JB_CSF_BLOCKED;
  Evidence ev;
  ev.causes = e;
  CollectedStacks stacks;
  auto r = record(0, 0, 200, 100);
  attribute(r, ev, true, ids, stacks);
  REQUIRE(r.cause.size() == 2);
  CHECK(r.cause[0].in_interrupt);
  CHECK(!r.cause[0].waker);
  CHECK(r.cause[1].by_kernel);
  CHECK(r.cause[1].state == "blocked_io");
  for (const auto& c : r.cause) CHECK(c.kind == "other");
  CHECK(r.why.find("999") == std::string::npos);
}

TEST_CASE("slices sum to the non-running time: a remainder is other, unattributed; an excess is scaled",
          "[causes]") {
  FakeIds ids;
  CollectedStacks stacks;
  SECTION("less evidence than time") {
    auto e = event();
    add(e, JB_CAUSE_SLEEP, 100, 35);
    Evidence ev;
    ev.causes = e;
    auto r = record(10, 5, 145);
    attribute(r, ev, true, ids, stacks);
    CHECK(total(r) == Approx(150));
    REQUIRE(r.cause.size() == 2);
    CHECK(r.cause[1].kind == "other");
    CHECK(r.cause[1].unattributed);
    CHECK(r.cause[1].ms == Approx(50));
  }
  SECTION("a remainder of tens of microseconds is said too: sums hold to the printed grain") {
    auto e = event();
    add(e, JB_CAUSE_RUNNABLE, 0.973);
    e.kind_ns[JB_CAUSE_RECLAIM] += 20'000;  // a kind's time with no slot: 0.02 ms
    Evidence ev;
    ev.causes = e;
    auto r = record(40, 1.002, 0);
    attribute(r, ev, true, ids, stacks);
    CHECK(total(r) == Approx(1.002).margin(0.0005));
    bool reclaim = false, other = false;
    for (const auto& c : r.cause) {
      reclaim |= c.kind == "reclaim" && c.ms == Approx(0.02);
      other |= c.unattributed && c.ms == Approx(0.009).margin(0.0005);
    }
    CHECK(reclaim);
    CHECK(other);
  }
  SECTION("time past the slots keeps its kind") {
    auto e = event();
    add(e, JB_CAUSE_RUNNABLE, 40);
    e.kind_ns[JB_CAUSE_RUNNABLE] += 60'000'000;  // charged with no slot left
    Evidence ev;
    ev.causes = e;
    auto r = record(0, 100, 0);
    attribute(r, ev, true, ids, stacks);
    CHECK(total(r) == Approx(100));
    for (const auto& c : r.cause) CHECK(c.kind == "runnable");
  }
  SECTION("asleep time past the slots is in the split's state: the slices' states sum to it") {
    auto e = event();
    for (int i = 0; i < JB_CAUSE_SLOTS; i++) add(e, JB_CAUSE_PEER, 10, i + 1);
    e.kind_ns[JB_CAUSE_PEER] += 7'000'000;  // wakers past the slots: 7 ms
    e.kind_ns[JB_CAUSE_IO] += 3'000'000;    // io with no slot left: 3 ms in D
    Evidence ev;
    ev.causes = e;
    auto r = record(5, 0, 87, 3);
    attribute(r, ev, true, ids, stacks);
    double sleeping = 0, blocked = 0;
    for (const auto& c : r.cause) {
      sleeping += c.state == "sleeping" ? c.ms : 0;
      blocked += c.state == "blocked_io" ? c.ms : 0;
    }
    CHECK(sleeping == Approx(87));
    CHECK(blocked == Approx(3));
  }
  SECTION("an asleep rest of a D-state kind in S when the split has no D left") {
    auto e = event();
    e.kind_ns[JB_CAUSE_IO] += 4'000'000;
    Evidence ev;
    ev.causes = e;
    auto r = record(5, 0, 4, 0);
    attribute(r, ev, true, ids, stacks);
    REQUIRE(r.cause.size() == 1);
    CHECK(r.cause[0].state == "sleeping");
  }
  SECTION("more than the split: scaled down, never more than the task") {
    auto e = event();
    add(e, JB_CAUSE_RUNNABLE, 120);
    Evidence ev;
    ev.causes = e;
    auto r = record(0, 100, 0);
    attribute(r, ev, true, ids, stacks);
    CHECK(total(r) == Approx(100));
  }
  SECTION("no record, off the CPU anyway") {
    Evidence ev;
    auto r = record(50, 0, 100);
    attribute(r, ev, true, ids, stacks);
    REQUIRE(r.cause.size() == 1);
    CHECK(r.cause[0].unattributed);
  }
  SECTION("causes off: nothing") {
    Evidence ev;
    auto r = record(50, 0, 100);
    attribute(r, ev, false, ids, stacks);
    CHECK(r.cause.empty());
    CHECK(r.why.empty());
    CHECK(!r.causes_known);
  }
}

TEST_CASE("runnable names the top three processes on its CPU; throttled the cgroup and quota", "[causes]") {
  FakeIds ids;
  CollectedStacks stacks;
  auto e = event();
  add(e, JB_CAUSE_RUNNABLE, 200);
  auto& t = add(e, JB_CAUSE_THROTTLED, 300, 77);
  t.cgroup_id = 77;
  t.hierarchy_id = 1;
  const char* names[] = {"a", "hog", "b", "c"};
  const double ms[] = {10, 150, 30, 5};
  for (int i = 0; i < 4; i++) {
    e.cpu.task[i].pid = 200 + i;
    e.cpu.task[i].tid = 200 + i;
    e.cpu.task[i].ns = static_cast<uint64_t>(ms[i] * 1e6);
    strcpy(e.cpu.task[i].comm, names[i]);
  }
  e.cpu.other_ns = 5'000'000;
  e.preempted = 3;
  Evidence ev;
  ev.causes = e;
  auto r = record(0, 500, 0);
  attribute(r, ev, true, ids, stacks);
  REQUIRE(r.cause.size() == 2);
  CHECK(r.cause[0].kind == "throttled");
  CHECK(r.cause[0].cgroup == "/jt-quota");
  CHECK(r.cause[0].quota == "20000/100000");
  const auto& run = r.cause[1];
  REQUIRE(run.cpu_tasks.size() == 3);
  CHECK(run.cpu_tasks[0].comm == "hog");
  CHECK(run.cpu_tasks[1].comm == "b");
  CHECK(run.cpu_others_ms == Approx(10));  // "c" and the rest
  CHECK(run.preempted == 3);
  CHECK(r.why ==
        "300 ms throttled by the cpu quota 20000/100000 µs of cgroup /jt-quota; "
        "200 ms queued for a CPU behind hog[201] 150 ms, b[202] 30 ms, a[200] 10 ms (preempted 3x)");
}

TEST_CASE("a sleep names the user frame that asked; a subject's chain goes one level on", "[causes]") {
  FakeIds ids;
  CollectedStacks stacks;
  auto e = event();
  auto& sl = add(e, JB_CAUSE_SLEEP, 300, nr_of("clock_nanosleep"));
  sl.nr = nr_of("clock_nanosleep");
  sl.max_off_ns = 5000;
  sl.flags = JB_CSF_WOKEN | JB_CSF_IRQ;
  auto cap = user_stack({"clock_nanosleep", "nanosleep"}, "/lib/x86_64-linux-gnu/libc.so.6");
  auto mine = user_stack({"nap_here", "main"});
  cap.frames.insert(cap.frames.end(), mine.frames.begin(), mine.frames.end());
  cap.wait_state = 'S';
  stacks.add_capture(kTid, 5000, cap);

  auto& p = add(e, JB_CAUSE_PEER, 200, 1);
  p.nr = nr_of("read");
  p.arg0 = 7;
  p.max_off_ns = 10'000;
  woken_by(p, 300, 300, "chainb");
  ids.fds[7] = "pipe:[42]";
  Evidence ev;
  ev.causes = e;
  jb_subject_event b{};
  b.tid = 300;
  b.pid = 300;
  b.role = JB_SUBJ_PEER;
  b.since_ns = 10'000;
  b.until_ns = 10'000 + 200'000'000;
  b.state_ns[JB_ST_SLEEPING] = 200'000'000;
  b.wait_nr = -1;
  b.flags = JB_CSF_WOKEN;
  b.waker_pid = 300;
  b.waker_tid = 301;
  strcpy(b.comm, "chainb");
  strcpy(b.waker_comm, "chainc");
  ev.subjects.push_back(b);
  stacks.add_sample(301, 50'000, user_stack({"crunch_c", "worker"}));

  auto r = record(0, 0, 500);
  attribute(r, ev, true, ids, stacks);
  REQUIRE(r.cause.size() == 2);
  CHECK(r.cause[0].frame == "nap_here (app.c:41)");
  const auto& peer = r.cause[1];
  CHECK(peer.fd_path == "pipe:[42]");
  REQUIRE(peer.waker);
  REQUIRE(peer.waker->next.size() == 1);
  CHECK(peer.waker->next[0].tid == 301);
  CHECK(peer.waker->next[0].verified);
  CHECK(peer.waker->next[0].function == "crunch_c");
  CHECK(r.why.find("for chainb[300] of pid 300 and waited 200 ms for chainc[301], which ran crunch_c") !=
        std::string::npos);
}

TEST_CASE("cause and why render in the JSON line, and not without causes", "[causes]") {
  TaskRecord r = record(1, 0, 10);
  CauseSlice s;
  s.kind = "sleep";
  s.ms = 10;
  s.count = 1;
  s.syscall = "nanosleep";
  r.cause.push_back(s);
  r.why = "10 ms sleeping in nanosleep";
  r.causes_known = true;
  auto j = nlohmann::json::parse(to_json_line(r));
  CHECK(j["why"] == r.why);
  CHECK(j["cause"][0]["kind"] == "sleep");
  CHECK(j["cause"][0]["ms"] == 10.0);
  r.causes_known = false;
  j = nlohmann::json::parse(to_json_line(r));
  CHECK(!j.contains("cause"));
  CHECK(!j.contains("why"));
}

TEST_CASE("cgroup hierarchies from /proc/cgroups and mountinfo, v1 and v2; quotas", "[causes]") {
  auto subs = parse_proc_cgroups(
      "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t1\t1\ncpu\t1\t1\t1\ncpuacct\t1\t1\t1\n"
      "junk line\nmemory\tx\t1\t1\n");
  CHECK(subs.at("cpu") == 1);
  CHECK(subs.at("cpuacct") == 1);
  CHECK(!subs.count("memory"));
  auto m = parse_cgroup_mounts(
      "30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:11 - cgroup cgroup rw,cpu,cpuacct\n"
      "31 25 0:27 / /sys/fs/cgroup/unified rw,relatime shared:12 - cgroup2 cgroup2 rw\n"
      "32 25 0:26 /sub /mnt/bind rw - cgroup cgroup rw,cpu,cpuacct\n"
      "garbage - \n- - -\n",
      subs);
  CHECK(m.at(1).first == "/sys/fs/cgroup/cpu,cpuacct");
  CHECK(m.at(1).second == "cgroup (cpu,cpuacct)");
  CHECK(m.at(0).first == "/sys/fs/cgroup/unified");
  CHECK(m.size() == 2);
  CHECK(quota_text("20000 100000", "", "") == "20000/100000");
  CHECK(quota_text("max 100000", "", "") == "max/100000");
  CHECK(quota_text("", "-1", "100000") == "max/100000");
  CHECK(quota_text("", "30000", "100000") == "30000/100000");
  CHECK(quota_text("", "", "").empty());
  CHECK(safe_name("a\nb\x1b") == "a\\nb\\x1b");
}

TEST_CASE("interrupt text from kallsyms: the functions' granules, modules and junk skipped", "[causes]") {
  CHECK(interrupt_function("asm_sysvec_apic_timer_interrupt"));
  CHECK(interrupt_function("hrtimer_wakeup"));
  CHECK(!interrupt_function("handle_softirqs"));  // a task's own local_bh_enable runs it too
  CHECK(!interrupt_function("pipe_write"));
  auto chunks = irq_text_chunks(
      "ffffffff81000100 T hrtimer_wakeup\n"
      "ffffffff81000130 T pipe_write\n"
      "ffffffff81000300 t sysvec_call_function\n"
      "ffffffff81000420 T next_one\n"
      "ffffffffc0000000 t hrtimer_interrupt\t[some_module]\n"
      "zzz T junk\nffffffff81000500 X odd\n",
      64);
  std::map<uint64_t, uint32_t> m(chunks.begin(), chunks.end());
  const uint64_t c1 = 0xffffffff81000100ull >> 8;
  // hrtimer_wakeup: [0x100, 0x130): granules 0x10..0x12 of chunk 0x...810001
  CHECK(m.at(c1) == 0b111u);
  // sysvec_call_function: [0x300, 0x420) spans chunks ...03 and ...04
  CHECK(m.at(c1 + 2) == 0xffffu);
  CHECK(m.at(c1 + 3) == 0b11u);
  CHECK(m.size() == 3);
  CHECK(irq_text_chunks("ffffffff81000100 T hrtimer_wakeup\nffffffff81000200 T x\n", 0).empty());
  // arm64's vectors: 4-byte aligned, el0t_64_irq right after el0t_64_sync's
  // last instruction (the return address of every syscall's stack).
  auto arm = irq_text_chunks(
      "ffff800008011808 t el0t_64_sync\n"
      "ffff800008011998 t el0t_64_irq\n"
      "ffff800008011b28 t el0t_64_fiq\n",
      64);
  auto is_irq = [&](uint64_t pc) {
    for (auto [chunk, mask] : arm)
      if (chunk == pc >> 8 && (mask >> ((pc >> 4) & 15) & 1)) return true;
    return false;
  };
  CHECK_FALSE(is_irq(0xffff800008011808ull + 0x18c));  // el0t_64_sync+0x18c
  CHECK(is_irq(0xffff800008011998ull + 0x100));        // inside el0t_64_irq
  CHECK_FALSE(is_irq(0xffff800008011b28ull + 4));      // el0t_64_fiq
}

TEST_CASE("the evidence store is bounded and a task's evidence goes with its record", "[causes]") {
  EvidenceStore store;
  for (uint64_t seq = 0; seq < EvidenceStore::kMaxTasks + 10; seq++) {
    jb_cause_event e = event();
    e.hdr.tid = 5;
    e.seq = seq;
    store.add_causes(e);
  }
  CHECK(store.size() == EvidenceStore::kMaxTasks);
  CHECK(store.dropped() == 10);
  jb_subject_event s{};
  s.hdr.tid = 5;
  s.seq = EvidenceStore::kMaxTasks + 9;
  for (int i = 0; i < 40; i++) store.add_subject(s);
  auto peek = store.peek(5, s.seq);
  CHECK(peek.subjects.size() == EvidenceStore::kMaxSubjectsPerTask);
  auto ev = store.take(5, s.seq);
  CHECK(ev.causes);
  CHECK(store.size() == 0);  // the thread's earlier tasks went with it
}

TEST_CASE("a JVM's pause is said first in why, and the wait it covers not again", "[causes]") {
  TaskRecord r;
  r.duration_ms = 320;
  r.state.running_ms = 20;
  CauseSlice lock;
  lock.kind = "other";
  lock.ms = 300;
  lock.count = 1;
  lock.syscall = "futex";
  lock.state = "sleeping";
  r.cause.push_back(lock);
  r.jvm_pause = JvmPause{"gc", "G1CollectFull", 290};
  const std::string why = cause::compose_why(r);
  CHECK(why.rfind("290 ms stopped by its JVM for a garbage collection (G1CollectFull)", 0) == 0);
  // The 10 ms of the wait the pause did not cover is under a tenth of the task.
  CHECK(why.find("futex") == std::string::npos);
  r.jvm_pause = JvmPause{"safepoint", "", 100};
  const std::string partly = cause::compose_why(r);
  CHECK(partly.rfind("200 ms sleeping in futex", 0) == 0);
  CHECK(partly.find("100 ms stopped by its JVM for a safepoint") != std::string::npos);
  r.jvm_pause.reset();
  CHECK(cause::compose_why(r).rfind("300 ms sleeping in futex", 0) == 0);
}

TEST_CASE("why says where the running time went from the on-CPU samples, not the heaviest (asleep) path", "[causes]") {
  TaskRecord r;
  r.duration_ms = 520;
  r.state.running_ms = 120;
  CauseSlice pipe;
  pipe.kind = "other";
  pipe.ms = 400;
  pipe.count = 1;
  pipe.syscall = "read";
  pipe.state = "sleeping";
  r.cause.push_back(pipe);
  StackFrame sched, read, spin;
  sched.symbol = "__schedule";
  sched.kernel = true;
  read.symbol = "read";
  read.file = "read.c";
  read.line = 24;
  spin.symbol = "spin_here";
  spin.file = "tests/apps/stack_loop.c";
  spin.line = 49;
  r.stack = {sched, read};  // the sleep's capture outweighs the spin's samples
  // Without the on-CPU path (a record read back, a unit's own), the stack stands for it.
  CHECK(cause::compose_why(r).find("120 ms running in read (read.c:24)") != std::string::npos);
  r.on_cpu_stack = std::vector<StackFrame>{spin};
  const std::string why = cause::compose_why(r);
  CHECK(why.rfind("400 ms sleeping in read", 0) == 0);
  CHECK(why.find("120 ms running in spin_here (stack_loop.c:49)") != std::string::npos);
  // No on-CPU sample at all: the running time is said without a place.
  r.on_cpu_stack = std::vector<StackFrame>{};
  CHECK(cause::compose_why(r).find("120 ms running") != std::string::npos);
  CHECK(cause::compose_why(r).find("running in") == std::string::npos);
}

TEST_CASE("interrupt text read from a file a block at a time is the text's, whatever its lines' lengths", "[causes]") {
  // Lines across the 64 KB block boundaries, one longer than a block
  // (dropped whole, as junk), the last without its newline.
  std::string text;
  for (int i = 0; i < 4000; i++) {
    char line[96];
    snprintf(line, sizeof line, "ffffffff8%07x %c %s_%d\n", 0x100000 + i * 0x40, i % 3 ? 'T' : 't',
             i % 97 == 0 ? "hrtimer_wakeup" : i % 89 == 0 ? "sysvec_thing" : "plain_function", i);
    text += line;
    if (i == 2500) text += "ffffffff81f00000 T " + std::string(70000, 'x') + "\n";
  }
  text += "ffffffff8f000000 T hrtimer_interrupt\nffffffff8f000100 T last_one";
  char path[] = "/tmp/jb-kallsyms-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  close(fd);
  std::vector<std::pair<uint64_t, uint32_t>> from_file;
  REQUIRE(irq_text_chunks_of_file(path, 4096, &from_file));
  unlink(path);
  // The file reading drops the over-long line; so does the text compared.
  std::string without = text;
  const size_t at = without.find("ffffffff81f00000 T xxx");
  without.erase(at, without.find('\n', at) + 1 - at);
  CHECK(from_file == irq_text_chunks(without, 4096));
  CHECK(from_file.size() > 40);
  CHECK(std::find_if(from_file.begin(), from_file.end(), [](auto c) { return c.first == 0xffffffff8f000000ull >> 8; }) !=
        from_file.end());
  std::vector<std::pair<uint64_t, uint32_t>> none;
  CHECK_FALSE(irq_text_chunks_of_file("/nonexistent/kallsyms", 64, &none));
  // This kernel's own, read both ways (as root its addresses are real).
  if (geteuid() == 0) {
    std::ifstream f("/proc/kallsyms");
    const std::string whole((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<std::pair<uint64_t, uint32_t>> live;
    REQUIRE(irq_text_chunks_of_file("/proc/kallsyms", 4096, &live));
    CHECK(!live.empty());
    CHECK(live == irq_text_chunks(whole, 4096));
  }
}
