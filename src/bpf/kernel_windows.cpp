#include "bpf/kernel_windows.h"

#include <bpf/libbpf.h>

#include "bpf/features.h"
#include "jank.skel.h"
#include "util/tracefs.h"

namespace jankbpf {

std::vector<KernelWindow> select_kernel_windows(jank_bpf* skel, bool timer, bool causes, bool kernel_locks) {
  auto& p = skel->progs;
  struct Progs {
    bpf_program *btf, *raw;
    size_t window, tracepoint;
  };
  std::vector<KernelWindow> windows = {
      {"cause_kernel_lock", "kernel_lock", {{"lock", "contention_begin"}, {"lock", "contention_end"}}},
      {"cause_reclaim",
       "reclaim",
       {{"vmscan", "mm_vmscan_direct_reclaim_begin"},
        {"vmscan", "mm_vmscan_direct_reclaim_end"},
        {"vmscan", "mm_vmscan_memcg_reclaim_begin"},
        {"vmscan", "mm_vmscan_memcg_reclaim_end"}}},
      {"cause_compaction", "compaction", {{"compaction", "mm_compaction_begin"}, {"compaction", "mm_compaction_end"}}},
  };
  const Progs progs[] = {
      {p.jb_kw_lock_begin_btf, p.jb_kw_lock_begin_raw, 0, 0},
      {p.jb_kw_lock_end_btf, p.jb_kw_lock_end_raw, 0, 1},
      {p.jb_kw_dreclaim_begin_btf, p.jb_kw_dreclaim_begin_raw, 1, 0},
      {p.jb_kw_dreclaim_end_btf, p.jb_kw_dreclaim_end_raw, 1, 1},
      {p.jb_kw_mreclaim_begin_btf, p.jb_kw_mreclaim_begin_raw, 1, 2},
      {p.jb_kw_mreclaim_end_btf, p.jb_kw_mreclaim_end_raw, 1, 3},
      {p.jb_kw_compact_begin_btf, p.jb_kw_compact_begin_raw, 2, 0},
      {p.jb_kw_compact_end_btf, p.jb_kw_compact_end_raw, 2, 1},
  };
  // A window is there when all its tracepoints are (an unpaired begin
  // would leave the window open).
  for (auto& w : windows) {
    w.present = causes && !disabled_by_env(w.feature);
    // Opt-in: with them attached the 6.1 x86_64 lane's guest livelocked in
    // both full runs, in neither of 2 without them (README, Why: kernel_lock).
    if (std::string_view(w.feature) == "cause_kernel_lock" && !kernel_locks) w.present = false, w.off = causes;
    for (const auto& [cat, name] : w.tracepoints) w.present = w.present && tracefs::has_event(cat, name);
  }
  for (const Progs& pr : progs) {
    const bool on = windows[pr.window].present;
    bpf_program__set_autoload(pr.btf, on && timer);
    bpf_program__set_autoload(pr.raw, on && !timer);
  }
  return windows;
}

void report_kernel_windows(const std::vector<KernelWindow>& windows, FeatureSet* features) {
  for (const auto& w : windows) {
    std::string names;
    for (const auto& [cat, name] : w.tracepoints) names += std::string(names.empty() ? "" : ", ") + cat + ":" + name;
    if (w.off) {
      features->set_off(w.feature, std::string("the `") + w.kind + "` cause: off by --no-kernel-locks");
      continue;
    }
    features->set(w.feature, w.present,
                  w.present ? std::string("the `") + w.kind + "` cause, from " + names
                            : "missing tracepoints (one of " + names + ")",
                  w.present ? "" : std::string("its off-CPU time stays in the wait's own kind (`other`, `peer`, ...)"));
  }
}

}  // namespace jankbpf
