#include "report/cause_view.h"

#include <cstdio>

namespace jankbpf::report {
namespace {

std::string hex(uint64_t v) {
  char b[32];
  snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

std::string who(const CauseThread& t) { return (t.comm.empty() ? "?" : t.comm) + "[" + std::to_string(t.tid) + "]"; }

// " running crunch_a (lock.c:41)": the function its samples named, if any.
std::string ran(const CauseThread& t) {
  if (t.function.empty()) return "";
  return " running " + t.function + (t.file.empty() ? "" : " (" + t.file + ")");
}

// The chain one level on: ", which waited for chainc[28039] running crunch_c".
std::string chain(const CauseThread& t) {
  std::string out;
  for (const auto& n : t.next)
    out += std::string(", which waited ") + (t.waited_kind == "lock" ? "on lock " + hex(t.waited_address) + " held by " : "for ") +
           who(n) + ran(n);
  return out;
}

}  // namespace

const CauseThread* cause_thread(const CauseSlice& s) {
  if (s.in_interrupt || s.by_kernel) return nullptr;
  if (s.kind == "lock") return s.owner ? &*s.owner : s.waker ? &*s.waker : nullptr;
  if (s.kind == "peer") return s.waker ? &*s.waker : nullptr;
  return nullptr;
}

std::string cause_identity(const CauseSlice& s) {
  if (s.kind == "throttled") {
    std::string out = s.cgroup.empty() ? "a cpu quota" : "cgroup " + s.cgroup;
    if (!s.quota.empty()) out += " (quota " + s.quota + ")";
    return out;
  }
  if (s.kind == "lock") {
    std::string out = (s.owner ? "mutex " : "lock ") + hex(s.address);
    if (!s.address_where.empty()) out += " (" + s.address_where + ")";
    if (s.owner)
      out += " held by " + who(*s.owner) + (s.owner->verified ? "" : " (claimed)") + ran(*s.owner) + chain(*s.owner);
    else if (s.waker)
      out += " released by " + who(*s.waker) + ran(*s.waker) + chain(*s.waker);
    return out;
  }
  if (s.kind == "peer") {
    std::string via = s.syscall;
    if (!s.fd_path.empty()) via += (via.empty() ? "" : " on ") + s.fd_path;
    if (!s.waker) return via.empty() ? "a peer" : via;
    const CauseThread& p = *s.waker;
    std::string out = who(p) + (p.pid && p.pid != p.tid ? " of pid " + std::to_string(p.pid) : "");
    if (!via.empty()) out += " via " + via;
    return out + ran(p) + chain(p);
  }
  if (s.kind == "runnable") {
    std::string out;
    for (const auto& c : s.cpu_tasks) out += (out.empty() ? "behind " : ", ") + c.comm + "[" + std::to_string(c.pid) + "]";
    if (s.preempted) out += std::string(out.empty() ? "" : " ") + "(preempted)";
    return out.empty() ? "queued for a CPU" : out;
  }
  if (s.kind == "sleep") {
    std::string out = s.syscall.empty() ? "a timed wait" : s.syscall;
    if (!s.frame.empty()) out += " from " + s.frame;
    return out;
  }
  if (s.unattributed) return "unattributed";
  std::string out = s.state.empty() ? s.kind : s.state;
  if (!s.syscall.empty()) out += " in " + s.syscall;
  if (!s.fd_path.empty()) out += " on " + s.fd_path;
  if (s.in_interrupt) out += " (woken by an interrupt)";
  else if (s.by_kernel && s.waker) out += " (woken by kernel thread " + who(*s.waker) + ")";
  else if (!s.kernel_stack.empty()) out += " at " + s.kernel_stack.front();
  if (!s.frame.empty()) out += " from " + s.frame;
  return out;
}

}  // namespace jankbpf::report
