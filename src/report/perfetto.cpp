#include "report/perfetto.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "cause/largest.h"
#include "report/cause_view.h"
#include "report/perfetto_frames.h"
#include "report/protobuf.h"
#include "report/sampled.h"

namespace jankbpf::report {
namespace {

// Field numbers from Perfetto's protos/perfetto/trace/perfetto_trace.proto.
namespace pkt {
constexpr uint32_t kFtraceEvents = 1, kTimestamp = 8, kSequenceId = 10, kTrackEvent = 11, kInternedData = 12,
                   kSequenceFlags = 13, kTrackDescriptor = 60, kPerfSample = 66;
}
constexpr uint32_t kSeqIncrementalStateCleared = 1, kSeqNeedsIncrementalState = 2;
constexpr uint32_t kSequence = 1;         // track events, samples and their interned data
constexpr uint32_t kFtraceSequence = 2;   // converted ftrace bundles
constexpr uint32_t kFrameSequence = 3;    // the FrameTimeline packets (perfetto_frames.cpp)

namespace te {  // TrackEvent
constexpr uint32_t kDebugAnnotations = 4, kType = 9, kTrackUuid = 11, kCategories = 22, kName = 23,
                   kFlowIds = 47, kTerminatingFlowIds = 48, kCallstackIid = 56;
constexpr uint64_t kSliceBegin = 1, kSliceEnd = 2, kInstant = 3;
}  // namespace te

constexpr uint64_t kProcessUuidBase = 0x6a62000000000000ULL;  // "jb"
constexpr uint64_t kThreadUuidBase = 0x6a63000000000000ULL;
constexpr uint64_t kOtherUuidBase = 0x6a64000000000000ULL;

uint64_t thread_uuid(int64_t pid, int64_t tid) {
  return kThreadUuidBase ^ (static_cast<uint64_t>(pid) << 24) ^ static_cast<uint64_t>(tid);
}

// A waker's track: its thread's; the idle task's per tid; one track for
// every wakeup from an interrupt (the task it landed on did not wake anyone).
uint64_t waker_uuid(const WakerInfo& w) {
  if (w.in_interrupt) return kOtherUuidBase | 0xffffffffull;
  return w.pid ? thread_uuid(w.pid, w.tid) : kOtherUuidBase | static_cast<uint64_t>(w.tid);
}

class Packets {
 public:
  void add(const ProtoWriter& packet) { out_.message(1, packet); }  // Trace.packet = 1
  std::string take() { return out_.take(); }

 private:
  ProtoWriter out_;
};

ProtoWriter packet(uint64_t ts, uint32_t seq = kSequence) {
  ProtoWriter p;
  if (ts) p.varint(pkt::kTimestamp, ts);
  p.varint(pkt::kSequenceId, seq);
  return p;
}

void annotate(ProtoWriter& ev, std::string_view name, double v) {
  ProtoWriter a;
  a.string(10, name);
  a.dbl(5, v);
  ev.message(te::kDebugAnnotations, a);
}
void annotate(ProtoWriter& ev, std::string_view name, std::string_view v) {
  ProtoWriter a;
  a.string(10, name);
  a.string(6, v);
  ev.message(te::kDebugAnnotations, a);
}
void annotate_int(ProtoWriter& ev, std::string_view name, int64_t v) {
  ProtoWriter a;
  a.string(10, name);
  a.sint(4, v);
  ev.message(te::kDebugAnnotations, a);
}

// The task's cause slices as one arg, an array of {kind, ms, identity}
// (the UI shows args.cause[0].kind ...): DebugAnnotation.array_values = 12,
// dict_entries = 11.
void annotate_causes(ProtoWriter& ev, const TaskRecord& r) {
  ProtoWriter a;
  a.string(10, "cause");
  for (const auto& c : r.cause) {
    ProtoWriter item, kind, ms, id;
    kind.string(10, "kind");
    kind.string(6, c.kind);
    item.message(11, kind);
    ms.string(10, "ms");
    ms.dbl(5, c.ms);
    item.message(11, ms);
    id.string(10, "identity");
    id.string(6, cause_identity(c));
    item.message(11, id);
    a.message(12, item);
  }
  ev.message(te::kDebugAnnotations, a);
}

// The threads a task's causes blame that were followed while it waited
// (the owner, the peer, and the one its chain goes on to), with the slice.
struct Blamed {
  const CauseSlice* slice;
  const CauseThread* thread;
  const CauseThread* waiter;  // nullptr: the watched thread itself; else the link before it
};
std::vector<Blamed> blamed_threads(const TaskRecord& r) {
  std::vector<Blamed> out;
  for (const auto& c : r.cause) {
    const CauseThread* th = cause_thread(c);
    if (!th || !th->followed || !th->pid || !th->tid) continue;
    out.push_back({&c, th, nullptr});
    for (const auto& n : th->next)
      if (n.pid && n.tid) out.push_back({&c, &n, th});
  }
  return out;
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", ms);
  return buf;
}

// Interned frames and callstacks, one per StackTable stack (an off-CPU
// stack ends in an "[off-CPU: STATE]" frame of its own), iids from 1.
ProtoWriter interned_stacks(const StackTable& table) {
  ProtoWriter in;
  std::map<std::string, uint64_t> names, mappings;
  auto name_iid = [&](const std::string& s) {
    auto [it, fresh] = names.try_emplace(s, names.size() + 1);
    if (fresh) {
      ProtoWriter m;
      m.varint(1, it->second);
      m.bytes(2, s);
      in.message(5, m);  // function_names
    }
    return it->second;
  };
  auto mapping_iid = [&](const std::string& module) {
    const std::string path = module.empty() ? "[unknown]" : module;
    auto [it, fresh] = mappings.try_emplace(path, mappings.size() + 1);
    if (fresh) {
      ProtoWriter s;
      s.varint(1, it->second);
      s.bytes(2, path);
      in.message(17, s);  // mapping_paths
      ProtoWriter m;
      m.varint(1, it->second);
      m.varint(7, it->second);  // path_string_ids (one component: the whole name)
      in.message(19, m);        // mappings
    }
    return it->second;
  };
  const auto& frames = table.frames();
  // Frame iids: table frames 1..N, then the off-CPU pseudo-frames.
  for (size_t i = 0; i < frames.size(); i++) {
    ProtoWriter f;
    f.varint(1, i + 1);
    f.varint(2, name_iid(frames[i].name));
    f.varint(3, mapping_iid(frames[i].module));
    in.message(6, f);
  }
  std::map<char, uint64_t> wait_frames;
  for (const auto& st : table.stacks()) {
    if (!st.wait_state || wait_frames.count(st.wait_state)) continue;
    uint64_t iid = frames.size() + 1 + wait_frames.size();
    wait_frames[st.wait_state] = iid;
    ProtoWriter f;
    f.varint(1, iid);
    f.varint(2, name_iid(off_cpu_frame(st.wait_state)));
    f.varint(3, mapping_iid("[kernel.kallsyms]"));
    in.message(6, f);
  }
  const auto& stacks = table.stacks();
  for (size_t i = 0; i < stacks.size(); i++) {
    ProtoWriter c;
    c.varint(1, i + 1);
    for (uint32_t f : stacks[i].frames) c.varint(2, f + 1ULL);  // bottom (root) frame first
    if (stacks[i].wait_state) c.varint(2, wait_frames[stacks[i].wait_state]);
    in.message(7, c);
  }
  return in;
}

void track(Packets& out, uint64_t uuid, const std::string& name, int64_t pid, int64_t tid, uint64_t parent = 0) {
  ProtoWriter d;
  d.varint(1, uuid);
  if (parent) d.varint(5, parent);
  if (!name.empty() && tid == 0 && pid == 0) d.string(2, name);
  if (tid) {
    ProtoWriter t;
    t.sint(1, pid);
    t.sint(2, tid);
    t.string(5, name);
    d.message(4, t);
  } else if (pid) {
    ProtoWriter p;
    p.sint(1, pid);
    p.string(6, name);
    d.message(3, p);
  }
  auto pk = packet(0);
  pk.message(pkt::kTrackDescriptor, d);
  out.add(pk);
}

void event(Packets& out, uint64_t ts, uint64_t type, uint64_t uuid, const std::string& name, ProtoWriter extra = {}) {
  ProtoWriter e;
  e.varint(te::kType, type);
  e.varint(te::kTrackUuid, uuid);
  if (type != te::kSliceEnd) {
    e.string(te::kCategories, "jankbpf");
    e.string(te::kName, name);
  }
  std::string body = e.take() + extra.data();
  auto pk = packet(ts);
  pk.bytes(pkt::kTrackEvent, body);
  pk.varint(pkt::kSequenceFlags, kSeqNeedsIncrementalState);
  out.add(pk);
}

bool has_final_jank(const Run& run, const TaskRecord& hang) {
  for (const auto& t : run.tasks)
    if (t.rec.kind == TaskRecord::Kind::Jank && t.rec.tid == hang.tid && t.rec.task_seq == hang.task_seq &&
        t.rec.begin_mono_ns == hang.begin_mono_ns)
      return true;
  return false;
}

void ftrace_bundles(Packets& out, std::vector<SchedEvent> sched) {
  std::sort(sched.begin(), sched.end(), [](const SchedEvent& a, const SchedEvent& b) {
    return a.cpu != b.cpu ? a.cpu < b.cpu : a.ts_ns < b.ts_ns;
  });
  constexpr size_t kPerBundle = 2000;
  for (size_t i = 0; i < sched.size();) {
    ProtoWriter bundle;
    bundle.varint(1, sched[i].cpu);
    size_t n = 0;
    const uint32_t cpu = sched[i].cpu;
    for (; i < sched.size() && sched[i].cpu == cpu && n < kPerBundle; i++, n++) {
      const SchedEvent& s = sched[i];
      ProtoWriter ev, body;
      ev.varint(1, s.ts_ns);
      ev.varint(2, static_cast<uint32_t>(s.pid));
      if (s.kind == SchedEvent::Kind::Switch) {
        body.string(1, s.prev_comm);
        body.sint(2, s.prev_pid);
        body.sint(3, s.prev_prio);
        body.sint(4, s.prev_state);
        body.string(5, s.next_comm);
        body.sint(6, s.next_pid);
        body.sint(7, s.next_prio);
        ev.message(4, body);  // sched_switch
      } else {
        body.string(1, s.prev_comm);
        body.sint(2, s.prev_pid);
        body.sint(3, s.prev_prio);
        body.sint(4, 1);
        body.sint(5, s.target_cpu);
        ev.message(s.kind == SchedEvent::Kind::Waking ? 20 : 17, body);  // sched_waking, sched_wakeup
      }
      bundle.message(2, ev);
    }
    auto pk = packet(0, kFtraceSequence);
    pk.message(pkt::kFtraceEvents, bundle);
    out.add(pk);
  }
}

}  // namespace

std::vector<TraceWindow> trace_windows(const Run& run) {
  std::map<std::string, TraceWindow> by_path;
  for (const auto& t : run.tasks) {
    for (const auto& p : t.rec.external_log) {
      if (!p.ends_with(".dat")) continue;
      uint64_t from = t.rec.begin_mono_ns > 2'000'000'000ULL ? t.rec.begin_mono_ns - 2'000'000'000ULL : 0;
      uint64_t to = t.rec.begin_mono_ns + static_cast<uint64_t>(t.rec.duration_ms * 1e6) + 1'000'000'000ULL;
      auto [it, fresh] = by_path.try_emplace(p, TraceWindow{p, from, to});
      if (!fresh) {
        it->second.from_ns = std::min(it->second.from_ns, from);
        it->second.to_ns = std::max(it->second.to_ns, to);
      }
    }
  }
  std::vector<TraceWindow> out;
  for (auto& [_, w] : by_path) out.push_back(w);
  return out;
}

std::string render_perfetto(const Run& run, const std::vector<SchedEvent>& sched, const SampleLimits& limits) {
  Packets out;
  // 1. The interned frames and callstacks, first on their sequence.
  {
    auto pk = packet(0);
    pk.varint(pkt::kSequenceFlags, kSeqIncrementalStateCleared | kSeqNeedsIncrementalState);
    pk.message(pkt::kInternedData, interned_stacks(run.table));
    out.add(pk);
  }
  // 2. Tracks: a process track per watched process, a thread track per
  //    watched thread and per waker.
  std::set<uint64_t> tracks;
  for (const auto& t : run.tasks) {
    const auto& r = t.rec;
    uint64_t puuid = kProcessUuidBase ^ static_cast<uint64_t>(r.proc.pid);
    if (tracks.insert(puuid).second) track(out, puuid, r.proc.name, r.proc.pid, 0);
    uint64_t tuuid = thread_uuid(r.proc.pid, r.tid);
    if (tracks.insert(tuuid).second) track(out, tuuid, r.thread_name, r.proc.pid, r.tid);
    for (const auto& o : r.off_cpu) {
      if (!o.has_waker) continue;
      uint64_t wuuid = waker_uuid(o.waker);
      if (!tracks.insert(wuuid).second) continue;
      if (o.waker.in_interrupt) track(out, wuuid, "interrupts (timers, devices)", 0, 0);
      else if (o.waker.pid) track(out, wuuid, o.waker.comm, o.waker.pid, o.waker.tid);
      else track(out, wuuid, "waker " + o.waker.comm + " (idle task)", 0, 0);
    }
    for (const auto& b : blamed_threads(r)) {
      uint64_t buuid = thread_uuid(b.thread->pid, b.thread->tid);
      if (tracks.insert(buuid).second) track(out, buuid, b.thread->comm, b.thread->pid, b.thread->tid);
    }
  }
  //    Wayland clients with frames: their processes, and the threads of janky frames.
  for (const auto& [pid, name] : run.frame_procs) {
    uint64_t puuid = kProcessUuidBase ^ static_cast<uint64_t>(pid);
    if (tracks.insert(puuid).second) track(out, puuid, name, pid, 0);
  }
  // Janky frames get a track of their own under the process: a frame may
  // span two tasks, and slices on one track must nest.
  auto frames_uuid = [](int64_t pid, uint32_t surface) {
    return kOtherUuidBase ^ 0x00f0000000000000ULL ^ (uint64_t{surface} << 24) ^ static_cast<uint64_t>(pid);
  };
  for (const auto& e : run.janky_frames) {
    uint64_t puuid = kProcessUuidBase ^ static_cast<uint64_t>(e.rec.proc.pid);
    if (tracks.insert(puuid).second) track(out, puuid, e.rec.proc.name, e.rec.proc.pid, 0);
    uint64_t fuuid = frames_uuid(e.rec.proc.pid, e.rec.frame.surface);
    if (tracks.insert(fuuid).second)
      track(out, fuuid, "janky frames of wl_surface@" + std::to_string(e.rec.frame.surface), 0, 0, puuid);
  }
  // 3. Each jank and hang, its off-CPU periods and its samples.
  uint64_t flow = 1;
  uint64_t samples_left = limits.per_trace;
  for (const auto& t : run.tasks) {
    const auto& r = t.rec;
    const bool hang = r.kind == TaskRecord::Kind::Hang;
    const uint64_t uuid = thread_uuid(r.proc.pid, r.tid);
    const uint64_t begin = r.begin_mono_ns;
    const uint64_t end = begin + static_cast<uint64_t>(r.duration_ms * 1e6);
    if (hang && has_final_jank(run, r)) {
      // The same task's jank slice holds it: mark when the hang was reported.
      event(out, end, te::kInstant, uuid, "hang reported (" + ms_text(r.duration_ms) + ")");
      continue;
    }
    ProtoWriter args;
    annotate(args, "duration_ms", r.duration_ms);
    annotate(args, "running_ms", r.state.running_ms);
    annotate(args, "runnable_ms", r.state.runnable_ms);
    annotate(args, "sleeping_ms", r.state.sleeping_ms);
    annotate(args, "blocked_io_ms", r.state.blocked_io_ms);
    annotate(args, "delivery_ms", r.delivery_ms);
    annotate(args, "wait_syscall", r.wait_syscall);
    annotate(args, "boundary", boundary_name(r.boundary));
    if (!r.runnable_name.empty()) annotate(args, "runnable_name", r.runnable_name);
    annotate_int(args, "task_seq", static_cast<int64_t>(r.task_seq));
    annotate_int(args, "samples", r.samples);
    for (const auto& p : r.external_log) annotate(args, p.ends_with(".dat") ? "trace" : "stack_log", p);
    if (!r.suppressed.empty()) annotate(args, "suppressed", suppressed_text(r.suppressed));
    if (r.causes_known) {
      annotate(args, "why", r.why);
      annotate(args, "largest_cause", cause::largest_kind(r));
      annotate_causes(args, r);
    }
    // The most-sampled stack rides on the slice itself.
    if (!t.samples.empty()) {
      std::map<uint32_t, uint64_t> n;
      for (const auto& s : t.samples) n[s.stack] += s.count;
      auto top = std::max_element(n.begin(), n.end(), [](auto& a, auto& b) { return a.second < b.second; });
      args.varint(te::kCallstackIid, top->first + 1ULL);
    }
    std::string name = std::string(hang ? "hang " : "jank ") + ms_text(r.duration_ms);
    if (!r.runnable_name.empty()) name += " " + r.runnable_name;
    event(out, begin, te::kSliceBegin, uuid, name, std::move(args));
    // Off-CPU periods inside the task, in order and not overlapping.
    std::vector<const OffCpuInfo*> offs;
    for (const auto& o : r.off_cpu)
      if (o.off_ns && o.woken_ns > o.off_ns) offs.push_back(&o);
    std::sort(offs.begin(), offs.end(), [](auto* a, auto* b) { return a->off_ns < b->off_ns; });
    uint64_t last = begin;
    for (const auto* o : offs) {
      uint64_t from = std::max(o->off_ns, last), to = std::min(o->woken_ns, end);
      if (from >= to) continue;
      ProtoWriter oa;
      annotate(oa, "state", o->state);
      annotate(oa, "duration_ms", o->duration_ms);
      if (!o->kernel_stack.empty()) annotate(oa, "kernel_stack", o->kernel_stack.front());
      if (o->has_waker) {
        annotate(oa, "waker", o->waker.comm);
        annotate_int(oa, "waker_pid", o->waker.pid);
        annotate_int(oa, "waker_tid", o->waker.tid);
      }
      event(out, from, te::kSliceBegin, uuid, "off-CPU: " + o->state, std::move(oa));
      event(out, to, te::kSliceEnd, uuid, "");
      if (o->has_waker && o->woken_ns <= end) {
        uint64_t wuuid = waker_uuid(o->waker);
        ProtoWriter f1, f2;
        f1.fixed64(te::kFlowIds, flow);
        event(out, o->woken_ns, te::kInstant, wuuid, "wakes " + r.thread_name + " (tid " + std::to_string(r.tid) + ")",
              std::move(f1));
        f2.fixed64(te::kTerminatingFlowIds, flow);
        event(out, o->woken_ns, te::kInstant, uuid,
              o->waker.in_interrupt ? std::string("woken by an interrupt") : "woken by " + o->waker.comm, std::move(f2));
        flow++;
      }
      last = to;
    }
    // A flow from each followed owner or peer (and the thread its chain
    // goes on to) to the waiter: at the wakeup it gave the watched thread
    // if one is known, else at the task's end.
    for (const auto& b : blamed_threads(r)) {
      const pid_t woke = b.waiter ? b.waiter->tid : b.thread->tid;
      uint64_t at = 0;
      for (const auto& o : r.off_cpu)
        if (o.has_waker && o.waker.tid == woke && o.woken_ns > begin && o.woken_ns <= end) at = std::max(at, o.woken_ns);
      if (!at) at = end > begin ? end - 1 : end;
      const std::string kind = b.slice->kind;
      ProtoWriter f1, f2;
      f1.fixed64(te::kFlowIds, flow);
      annotate(f1, "identity", cause_identity(*b.slice));
      const std::string whom = b.waiter ? b.waiter->comm + "[" + std::to_string(b.waiter->tid) + "]"
                                        : r.thread_name + "[" + std::to_string(r.tid) + "]";
      std::string what = b.thread->function.empty() ? "" : " (ran " + b.thread->function + ")";
      event(out, at, te::kInstant, thread_uuid(b.thread->pid, b.thread->tid), "cause: " + kind + " of " + whom + what,
            std::move(f1));
      f2.fixed64(te::kTerminatingFlowIds, flow);
      const std::string who = b.thread->comm + "[" + std::to_string(b.thread->tid) + "]";
      event(out, at, te::kInstant, b.waiter ? thread_uuid(b.waiter->pid, b.waiter->tid) : uuid,
            (b.waiter ? "waited for " : kind + ": waited for ") + who, std::move(f2));
      flow++;
    }
    event(out, end, te::kSliceEnd, uuid, "");
    // The samples: a stack log has no times, so its samples are spread
    // evenly over the task. A count is the log's word, not a packet each:
    // past limits.per_task (or what is left of limits.per_trace)
    // every stack keeps its share, so the flame graph keeps its shape.
    uint64_t claimed = 0;
    for (const auto& s : t.samples) claimed += s.time_ns ? 1 : s.count;
    const uint64_t allowed = std::min<uint64_t>({claimed, limits.per_task, samples_left});
    auto emitted = [&](const Sample& s) -> uint64_t {
      const uint64_t n = s.time_ns ? 1 : s.count;
      if (allowed == claimed || !n) return n;
      return std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<long double>(n) * allowed / claimed));
    };
    uint64_t total = 0;
    for (const auto& s : t.samples) total += emitted(s);
    total = std::min(total, allowed);
    uint64_t k = 0, used = 0;
    for (const auto& s : t.samples) {
      const uint64_t n = std::min(emitted(s), allowed - used);
      used += n;
      samples_left -= n;
      for (uint64_t c = 0; c < n; c++, k++) {
        uint64_t ts = s.time_ns ? s.time_ns : begin + (end - begin) * (2 * k + 1) / (2 * std::max<uint64_t>(total, 1));
        ProtoWriter ps;
        ps.varint(2, static_cast<uint32_t>(r.proc.pid));
        ps.varint(3, static_cast<uint32_t>(r.tid));
        ps.varint(4, s.stack + 1ULL);  // callstack_iid
        ps.varint(5, 2);               // cpu_mode: MODE_USER
        auto pk = packet(ts);
        pk.message(pkt::kPerfSample, ps);
        pk.varint(pkt::kSequenceFlags, kSeqNeedsIncrementalState);
        out.add(pk);
      }
    }
  }
  // 4. Janky frames on their thread's track, with the stacks sampled in them.
  for (const auto& e : run.janky_frames) {
    const FrameTiming& f = e.rec.frame;
    const uint64_t uuid = frames_uuid(e.rec.proc.pid, f.surface);
    ProtoWriter args;
    annotate(args, "jank_type", frame_jank_name(f.jank));
    annotate_int(args, "skipped_frames", f.skipped_frames);
    annotate(args, "duration_ms", f.duration_ms());
    annotate(args, "interval_ms", f.interval_ns / 1e6);
    annotate(args, "surface", "wl_surface@" + std::to_string(f.surface));
    annotate_int(args, "frame_number", static_cast<int64_t>(f.number));
    annotate(args, "running_ms", f.running_ms);
    annotate(args, "runnable_ms", f.runnable_ms);
    annotate(args, "sleeping_ms", f.sleeping_ms);
    annotate(args, "blocked_io_ms", f.blocked_io_ms);
    if (f.task_seq) annotate_int(args, "task_seq", static_cast<int64_t>(f.task_seq));
    if (!e.rec.runnable_name.empty()) annotate(args, "runnable_name", e.rec.runnable_name);
    for (const auto& why : e.rec.why) annotate(args, "why", why);  // its long task's (frame/frame_causes.h)
    if (!e.samples.empty()) {
      std::map<uint32_t, uint64_t> n;
      for (const auto& smp : e.samples) n[smp.stack] += smp.count;
      auto top = std::max_element(n.begin(), n.end(), [](auto& a, auto& b) { return a.second < b.second; });
      args.varint(te::kCallstackIid, top->first + 1ULL);
    }
    std::string name = "janky frame " + ms_text(f.duration_ms()) + " " + frame_jank_name(f.jank);
    if (!e.rec.runnable_name.empty()) name += " " + e.rec.runnable_name;
    event(out, f.start_ns, te::kSliceBegin, uuid, name, std::move(args));
    event(out, std::max(f.end_ns, f.start_ns + 1), te::kSliceEnd, uuid, "");
    for (const auto& smp : e.samples) {
      if (!smp.time_ns) continue;
      ProtoWriter ps;
      ps.varint(2, static_cast<uint32_t>(e.rec.proc.pid));
      ps.varint(3, static_cast<uint32_t>(f.tid));
      ps.varint(4, smp.stack + 1ULL);
      ps.varint(5, 2);
      auto pk = packet(smp.time_ns);
      pk.message(pkt::kPerfSample, ps);
      pk.varint(pkt::kSequenceFlags, kSeqNeedsIncrementalState);
      out.add(pk);
    }
  }
  // 5. What ran on the CPUs, from the saved traces.
  ftrace_bundles(out, sched);
  // 6. Every frame's expected and actual timeline, as FrameTimeline writes them.
  return out.take() + frame_timeline_packets(run, kFrameSequence);
}

}  // namespace jankbpf::report
