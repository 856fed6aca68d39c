#include "bpf/program_select.h"

#include <bpf/libbpf.h>

#include "arch/arch.h"
#include "bpf/hooks.h"
#include "jank.skel.h"
#include "jankbpf/hooks.h"
#include "util/tracefs.h"

namespace jankbpf {

namespace {

// The wait hooks as trampolines, from the table both sides share
// (include/jankbpf/hooks.h). As tracepoints they are four shared programs.
struct WaitProgs {
  const char* name;
  bool child;
  bpf_program *fentry[3], *fexit[3];  // slot 0 native, 1-2 ia32
};

std::vector<WaitProgs> wait_programs(jank_bpf* skel) {
  auto& p = skel->progs;
  (void)p;
  return {
#define JB_X(n)                                                        \
  {#n, false,                                                           \
   {p.jb_fenter0_##n, p.jb_fenter1_##n, p.jb_fenter2_##n},              \
   {p.jb_fexit0_##n, p.jb_fexit1_##n, p.jb_fexit2_##n}},
      JB_EVENT_WAITS(JB_X)
#undef JB_X
#define JB_X(n)                                                        \
  {#n, true,                                                            \
   {p.jb_cwfenter0_##n, p.jb_cwfenter1_##n, p.jb_cwfenter2_##n},        \
   {p.jb_cwfexit0_##n, p.jb_cwfexit1_##n, p.jb_cwfexit2_##n}},
      JB_CHILD_WAITS(JB_X)
#undef JB_X
  };
}

}  // namespace

std::vector<TpWait> tracepoint_waits() {
  std::vector<TpWait> out;
  for (bool child : {false, true})
    for (const auto& w : child ? host_arch().child_waits : host_arch().wait_syscalls) {
      std::string name(w.name);
      long nr = host_syscall_nr(name);
      if (nr >= 0 && nr < JB_MAX_SYSCALL_NR && tracefs::has_event("syscalls", "sys_enter_" + name))
        out.push_back({name, child, nr});
    }
  return out;
}

// Event-loop waits only: a child wait found at attach may be system()'s
// (part of a task) as well as a shell's wait for its job.
WaitNumbers wait_numbers() {
  WaitNumbers out;
  static_assert(sizeof out.native == JB_MAX_SYSCALL_NR);
  for (const auto& w : host_arch().wait_syscalls) {
    const auto id = static_cast<uint8_t>(wait_id(w.name) + 1);
    if (long nr = host_syscall_nr(w.name); nr >= 0 && nr < JB_MAX_SYSCALL_NR) out.native[nr] = id;
    for (long nr : compat_syscall_nrs(w.name))
      if (nr >= 0 && nr < JB_MAX_SYSCALL_NR) out.compat[nr] = id;
  }
  return out;
}

bool raw_syscall_waits(bool trampolines, WatchdogMode mode, HookKind hooks) {
  return !trampolines && hooks == HookKind::RawTracepoint && mode == WatchdogMode::Timer &&
         host_arch().arch == Arch::X86_64;
}

std::vector<std::string> present_functions(const KernelFuncs& kernel, const std::string& syscall) {
  std::vector<std::string> out;
  for (const auto& f : syscall_functions(host_arch(), syscall)) {
    if (kernel.has(f)) out.push_back(f);
    else if (out.empty()) return {};
  }
  return out;
}

// Which programs load: the timer watchdog needs tp_btf programs, the scan
// watchdog raw_tp + perf_event; the waits as trampolines or tracepoints.
void select_programs(jank_bpf* skel, WatchdogMode mode, bool stacks, bool offcpu, bool markers,
                     bool trampolines, bool raw, bool adopt, const KernelFuncs& kernel) {
  const bool timer = mode == WatchdogMode::Timer;
  bpf_program* btf_progs[] = {skel->progs.jb_switch_btf, skel->progs.jb_wakeup_btf,
                              skel->progs.jb_wakeup_new_btf, skel->progs.jb_exit_btf,
                              skel->progs.jb_waking_btf, skel->progs.jb_exec_btf};
  bpf_program* raw_progs[] = {skel->progs.jb_switch_raw, skel->progs.jb_wakeup_raw,
                              skel->progs.jb_wakeup_new_raw, skel->progs.jb_exit_raw,
                              skel->progs.jb_scan, skel->progs.jb_exec_raw};
  for (auto* p : btf_progs) bpf_program__set_autoload(p, timer);
  // The waker is only wanted with off-CPU captures.
  bpf_program__set_autoload(skel->progs.jb_waking_btf, timer && offcpu);
  bpf_program__set_autoload(skel->progs.jb_waking_raw, !timer && offcpu);
  for (auto* p : raw_progs) bpf_program__set_autoload(p, !timer);
  bpf_program__set_autoload(skel->progs.jb_sample, stacks);
  bpf_program__set_autoload(skel->progs.jb_adopt, adopt);
  bpf_program__set_autoattach(skel->progs.jb_adopt, false);
  // Markers are attached one probe site at a time (attach_uprobe/usdt).
  for (auto* p : {skel->progs.jb_mark_begin, skel->progs.jb_mark_end, skel->progs.jb_usdt_begin,
                  skel->progs.jb_usdt_end}) {
    bpf_program__set_autoload(p, markers);
    bpf_program__set_autoattach(p, false);
  }

  // Shell jobs: the child waits bound tasks only after a setpgid of a child.
  std::vector<std::string> setpgid = trampolines ? present_functions(kernel, "setpgid") : std::vector<std::string>{};
  bpf_program* fsetpgid[] = {skel->progs.jb_fsetpgid0, skel->progs.jb_fsetpgid1};
  for (size_t i = 0; i < 2; i++) {
    // Slot 1 takes the first ia32 entry point there is.
    const std::string* target = i == 0 ? (setpgid.empty() ? nullptr : &setpgid[0])
                                       : (setpgid.size() > 1 ? &setpgid[1] : nullptr);
    bpf_program__set_autoload(fsetpgid[i], target != nullptr);
    if (target) bpf_program__set_attach_target(fsetpgid[i], 0, target->c_str());
  }
  bpf_program__set_autoload(skel->progs.jb_job_setpgid, !trampolines && !raw &&
                                                           tracefs::has_event("syscalls", "sys_enter_setpgid"));

  // Wait hooks: only the syscalls this arch has and this kernel has. The
  // tracepoint programs are attached by attach_wait_tracepoints().
  for (auto* p : {skel->progs.jb_tp_wait_enter, skel->progs.jb_tp_wait_exit, skel->progs.jb_tp_cwait_enter,
                  skel->progs.jb_tp_cwait_exit}) {
    bpf_program__set_autoload(p, !trampolines && !raw);
    bpf_program__set_autoattach(p, false);
  }
  bpf_program__set_autoload(skel->progs.jb_raw_sys_enter, raw);
  bpf_program__set_autoload(skel->progs.jb_raw_sys_exit, raw);
  for (const WaitProgs& h : wait_programs(skel)) {
    bool here = false;
    for (const auto& w : h.child ? host_arch().child_waits : host_arch().wait_syscalls)
      here |= w.name == h.name;
    std::vector<std::string> fns = here && trampolines ? present_functions(kernel, h.name)
                                                       : std::vector<std::string>{};
    for (size_t slot = 0; slot < 3; slot++) {
      const bool on = slot < fns.size();
      bpf_program__set_autoload(h.fentry[slot], on);
      bpf_program__set_autoload(h.fexit[slot], on);
      if (!on) continue;
      bpf_program__set_attach_target(h.fentry[slot], 0, fns[slot].c_str());
      bpf_program__set_attach_target(h.fexit[slot], 0, fns[slot].c_str());
    }
  }
}


}  // namespace jankbpf
