#include "cause/why.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "stack/tree.h"

namespace jankbpf::cause {
namespace {

std::string hex(uint64_t v) {
  char b[32];
  snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

std::string who(const CauseThread& t) {
  std::string s = (t.comm.empty() ? "?" : t.comm) + "[" + std::to_string(t.tid) + "]";
  return s;
}

// "which ran crunch_a (lock.c:41) for 398 ms"
std::string what_it_did(const CauseThread& t) {
  std::string out;
  if (!t.function.empty()) {
    out = ", which ran " + t.function + (t.file.empty() ? "" : " (" + t.file + ")");
    if (t.state.running_ms >= 0.5) out += " for " + ms_text(t.state.running_ms);
  } else if (t.followed && t.state.running_ms >= 0.5) {
    out = ", which ran for " + ms_text(t.state.running_ms);
  }
  for (const auto& n : t.next) {
    const double waited = t.state.sleeping_ms + t.state.blocked_io_ms;
    out += " and waited";
    if (waited >= 0.5) out += " " + ms_text(waited);
    out += (t.waited_kind == "lock" ? " on lock " + hex(t.waited_address) + " held by " : " for ") + who(n);
    if (!n.function.empty())
      out += ", which ran " + n.function + (n.file.empty() ? "" : " (" + n.file + ")") +
             (n.state.running_ms >= 0.5 ? " for " + ms_text(n.state.running_ms) : "");
  }
  return out;
}

std::string pid_suffix(const CauseThread& t, pid_t own_pid) {
  return t.pid && t.pid != own_pid ? " of pid " + std::to_string(t.pid) : "";
}

}  // namespace

std::string ms_text(double ms) {
  char b[32];
  if (ms >= 10) snprintf(b, sizeof b, "%.0f ms", ms);
  else snprintf(b, sizeof b, "%.1f ms", ms);
  return b;
}

std::string describe(const CauseSlice& s) {
  const std::string t = ms_text(s.ms);
  if (s.kind == "throttled") {
    std::string out = t + " throttled by the cpu quota";
    if (!s.quota.empty()) out += " " + s.quota + " µs";
    if (!s.cgroup.empty()) out += " of cgroup " + s.cgroup;
    return out;
  }
  if (s.kind == "lock") {
    std::string out = t + (s.owner ? " on mutex " : " on lock ") + hex(s.address);
    if (!s.address_where.empty()) out += " (" + s.address_where + ")";
    if (s.owner) {
      out += " held by " + who(*s.owner) + (s.owner->verified ? "" : " (claimed by the lock, unverified)");
      out += what_it_did(*s.owner);
    } else if (s.waker) {
      out += ", released by " + who(*s.waker) + what_it_did(*s.waker);
    }
    return out;
  }
  if (s.kind == "peer") {
    std::string out = t + " waiting";
    if (!s.syscall.empty()) out += " in " + s.syscall;
    if (!s.fd_path.empty()) out += " on " + s.fd_path;
    else if (s.has_address) out += " on " + hex(s.address);
    if (s.waker) out += " for " + who(*s.waker) + pid_suffix(*s.waker, 0) + what_it_did(*s.waker);
    return out;
  }
  if (s.kind == "runnable") {
    std::string out = t + " queued for a CPU";
    if (!s.cpu_tasks.empty()) {
      out += " behind ";
      for (size_t i = 0; i < s.cpu_tasks.size(); i++) {
        const auto& c = s.cpu_tasks[i];
        out += (i ? ", " : "") + c.comm + "[" + std::to_string(c.pid) + "] " + ms_text(c.ms);
      }
    }
    if (s.preempted) out += " (preempted " + std::to_string(s.preempted) + "x)";
    return out;
  }
  if (s.kind == "kernel_lock") {
    std::string out = t + " on kernel lock " + (s.lock_name.empty() ? hex(s.address) : s.lock_name) + " (" +
                      s.lock_class + (s.lock_mode.empty() ? "" : " " + s.lock_mode) + ")";
    if (s.owner) {
      out += " held by " + who(*s.owner) + (s.owner_reader_hint ? " (its last reader)" : "");
      // The owner's first frame past the scheduler's own: what it was doing.
      for (const auto& f : s.owner_kernel_stack)
        if (f.find("schedule") == std::string::npos && f.find("switch_to") == std::string::npos &&
            f.find("cond_resched") == std::string::npos) {
          out += " in " + f.substr(0, f.find('+'));
          break;
        }
    }
    return out;
  }
  if (s.kind == "reclaim" || s.kind == "compaction") {
    std::string out = t + " in " + (s.kind == "reclaim" ? (s.memcg_reclaim ? "memcg reclaim" : "direct reclaim")
                                                         : "direct compaction");
    if (!s.cgroup.empty()) out += " of cgroup " + s.cgroup;
    if (s.window_ms > s.ms + 0.5) out += " (" + ms_text(s.window_ms) + " inside it, " + ms_text(s.window_ms - s.ms) + " running)";
    return out;
  }
  if (s.kind == "sleep") {
    std::string out = t + " sleeping";
    if (!s.syscall.empty()) out += " in " + s.syscall;
    if (!s.frame.empty()) out += " called from " + s.frame;
    return out;
  }
  if (s.kind == "fault") {
    std::string out = t + " in major page faults";
    if (s.faults) out += " (" + std::to_string(s.faults) + " addresses)";
    if (!s.file.empty()) {
      out += " on " + s.file;
      if (s.has_offsets) out += " [" + hex(s.offset_lo) + ", " + hex(s.offset_hi) + ")";
    } else if (!s.address_where.empty()) {
      out += " on " + s.address_where;
    }
    if (!s.frame.empty()) out += " touched by " + s.frame;
    return out;
  }
  if (s.kind == "io") {
    std::string out = t + " waiting for block I/O";
    if (!s.syscall.empty()) out += " in " + s.syscall;
    if (!s.fd_path.empty()) out += " on " + s.fd_path;
    if (!s.device.empty()) out += " (device " + (s.device_name.empty() ? s.device : s.device_name + " " + s.device);
    if (s.requests) {
      char b[96];
      snprintf(b, sizeof b, ", %u requests, %.1f MB", s.requests, static_cast<double>(s.bytes) / 1e6);
      out += b;
      if (s.requests_done) out += ", device " + ms_text(s.device_ms);
    }
    if (!s.device.empty()) out += ")";
    if (s.frame.size() && s.syscall.empty()) out += " called from " + s.frame;
    return out;
  }
  // other (and the kinds not told apart yet)
  if (s.unattributed) return t + " off the CPU, unattributed";
  std::string out = t + " " + (s.state.empty() ? s.kind : s.state);
  if (!s.syscall.empty()) out += " in " + s.syscall;
  if (!s.fd_path.empty()) out += " on " + s.fd_path;
  if (s.in_interrupt) out += " (woken by an interrupt)";
  else if (s.by_kernel && s.waker) out += " (woken by kernel thread " + who(*s.waker) + ")";
  else if (!s.kernel_stack.empty()) out += " at " + s.kernel_stack.front();
  if (!s.frame.empty()) out += " called from " + s.frame;
  return out;
}

std::string compose_why(const TaskRecord& rec) {
  // Running is not a cause, but when it is the largest share the line
  // says where the CPU went (the heaviest stack's acting frame).
  struct Item {
    double ms;
    std::string text;
  };
  std::vector<Item> items;
  if (rec.state.running_ms >= 0.5) {
    std::string where;
    for (const auto& f : rec.on_cpu_stack ? *rec.on_cpu_stack : rec.stack)
      if (!f.kernel && !f.inlined && !f.symbol.empty()) {
        std::string file = f.file.substr(f.file.rfind('/') + 1);
        where = f.symbol + (file.empty() ? "" : " (" + file + (f.line ? ":" + std::to_string(f.line) : "") + ")");
        break;
      }
    items.push_back({rec.state.running_ms, ms_text(rec.state.running_ms) + " running" + (where.empty() ? "" : " in " + where)});
  }
  // The JVM's own pause (a GC, a safepoint: runtime/jvm_pause.h) is said
  // first, and the off-CPU slices it covers (the thread asleep until the
  // VM thread let it go) are not said again for that time.
  double pause_left = 0;
  if (rec.jvm_pause && rec.jvm_pause->ms >= 0.5) {
    const auto& p = *rec.jvm_pause;
    std::string what = p.kind == "gc" ? "a garbage collection" : "a safepoint";
    if (!p.operation.empty()) what += " (" + p.operation + ")";
    items.push_back({p.ms, ms_text(p.ms) + " stopped by its JVM for " + what});
    pause_left = p.ms;
  }
  for (const auto& c : rec.cause) {
    double ms = c.ms;
    if (pause_left > 0 && c.kind != "runnable" && c.kind != "throttled") {
      const double covered = std::min(ms, pause_left);
      pause_left -= covered;
      ms -= covered;
      if (ms < 0.5) continue;
      CauseSlice rest = c;
      rest.ms = ms;
      items.push_back({ms, describe(rest)});
      continue;
    }
    items.push_back({ms, describe(c)});
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.ms > b.ms; });
  std::string out;
  size_t said = 0;
  for (const auto& i : items) {
    // The largest always; then those of at least a tenth of the task, up to three.
    if (said && (said >= 3 || i.ms < 0.1 * rec.duration_ms)) break;
    out += (said++ ? "; " : "") + i.text;
  }
  return out;
}

}  // namespace jankbpf::cause
