#include "app/record_builder.h"

#include "bpf/hooks.h"

#include <cstring>

#include "arch/arch.h"
#include "proc/container.h"

namespace jankbpf {

std::string kernel_string(const char* s, size_t max) { return std::string(s, strnlen(s, max)); }

TaskRecord RecordBuilder::task(const jb_task_event& e) {
  ExeFile exe;
  TaskRecord r = task(e, exe);
  r.proc.build_id = exe.build_id();
  return r;
}

TaskRecord RecordBuilder::task(const jb_task_event& e, ExeFile& exe) {
  TaskRecord r;
  r.kind = e.hdr.type == JB_EV_HANG ? TaskRecord::Kind::Hang : TaskRecord::Kind::Jank;
  r.time_ms = clock_.now_ms();
  r.proc.pid = static_cast<pid_t>(e.hdr.pid);
  r.proc.uid = e.uid;
  r.proc.name = kernel_string(e.proc_comm, sizeof e.proc_comm);
  r.tid = static_cast<pid_t>(e.hdr.tid);
  r.thread_name = kernel_string(e.comm, sizeof e.comm);
  // Records made by the watchdog (hang) run outside the thread: ask /proc.
  if (r.proc.name.empty()) r.proc.name = read_comm(r.proc.pid);
  if (r.thread_name.empty() && r.tid == r.proc.pid) r.thread_name = r.proc.name;
  if (e.hdr.type != JB_EV_TASK_END) {
    long uid = read_uid(r.proc.pid);
    if (uid >= 0) r.proc.uid = static_cast<uint32_t>(uid);
  }
  exe = exes_.open(r.proc.pid);
  r.proc.exe = exe.path;
  r.proc.cgroup = read_cgroup(r.proc.pid);
  r.proc.container_id = container_id_from_cgroup(r.proc.cgroup);

  r.begin_mono_ns = e.begin_ns;
  r.begin_time_ms = clock_.epoch_ms(e.begin_ns);
  r.end_time_ms = clock_.epoch_ms(e.end_ns);
  r.duration_ms = static_cast<double>(e.end_ns - e.begin_ns) / 1e6;
  r.threshold_ms = e.threshold_ms;
  r.state.running_ms = static_cast<double>(e.state_ns[JB_ST_RUNNING]) / 1e6;
  r.state.runnable_ms = static_cast<double>(e.state_ns[JB_ST_RUNNABLE]) / 1e6;
  r.state.sleeping_ms = static_cast<double>(e.state_ns[JB_ST_SLEEPING]) / 1e6;
  r.state.blocked_io_ms = static_cast<double>(e.state_ns[JB_ST_BLOCKED]) / 1e6;
  r.delivery_ms = static_cast<double>(e.delivery_ns) / 1e6;
  std::string_view name = wait_name(e.wait_syscall);
  r.wait_syscall = name.empty() ? "wait_" + std::to_string(e.wait_syscall) : std::string(name);
  r.task_seq = e.seq;
  switch (e.boundary) {
    case JB_BOUND_MARKER: {
      r.boundary = Boundary::Marker;
      const MarkerInfo* m = markers_ ? markers_->find(e.marker_id) : nullptr;
      r.runnable_name = runnable_name(e.runnable_name, sizeof e.runnable_name, m);
      if (m) r.marker = *m;
      break;
    }
    case JB_BOUND_AFTER_MARKER: r.boundary = Boundary::AfterMarker; break;
    default: r.boundary = Boundary::Syscall; break;
  }
  r.seen_running = e.flags & JB_TASKF_CROSSED;
  r.unrecovered = e.flags & JB_TASKF_UNRECOVERED;
  r.begin_at_switch_in = e.flags & JB_TASKF_SWITCH_IN;
  return r;
}

ExitRecord RecordBuilder::exit(const jb_exit_event& e) {
  ExitRecord r;
  r.time_ms = clock_.epoch_ms(e.hdr.time_ns);
  r.pid = static_cast<pid_t>(e.hdr.pid);
  r.name = kernel_string(e.comm, sizeof e.comm);
  // The kernel's exit_code: status << 8, or the terminating signal.
  int code = e.exit_code;
  r.exit_code = (code & 0x7f) ? 128 + (code & 0x7f) : (code >> 8) & 0xff;
  r.target = e.flags & JB_PROCF_TARGET;
  return r;
}

}  // namespace jankbpf
