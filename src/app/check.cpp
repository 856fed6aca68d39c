#include "app/check.h"

#include <sys/utsname.h>

#include <cstdio>

#include "app/monitor.h"
#include "arch/arch.h"
#include "arch/regs.h"
#include "bpf/detector.h"
#include "bpf/features.h"
#include "frame/frame_check.h"
#include "util/lazy_pages.h"
#include "util/tracefs.h"

namespace jankbpf {

int run_check(const Options& opts) {
  FeatureSet features;
  // What a default run asks for: stacks, off-CPU captures, traces.
  DetectorConfig cfg = detector_config(opts);
  std::string error;
  const bool loads = Detector::probe(cfg, &features, &error);
  if (!loads) features.set("bpf_programs", false, error);

  std::string detail;
  bool ok = probe::perf_user_stacks(reg_table(host_arch().arch).sample_regs_user, opts.stack_bytes, &detail);
  features.set("perf_sampling", ok, detail, ok ? "" : "janks without on-CPU stacks");
  ok = probe::uprobes(&detail);
  features.set("uprobes", ok, detail, ok ? "" : "no --marker");
  ok = features.ok("trampolines") || tracefs::has_event("syscalls", "sys_enter_setpgid");
  features.set("setpgid_hook", ok, ok ? "a shell's setpgid of a job is seen" : "no syscalls:sys_enter_setpgid",
               ok ? "" : "a shell's foreground jobs count as its tasks");
  ok = probe::trace_cmd(&detail);
  features.set("trace_cmd", ok, detail, ok ? "" : "traces saved as text");
  frame::check_frames(opts.frames, features);  // Wayland frames, the DRM side
  ok = util::LazyPages::get().available(&detail);
  features.set("lazy_dwarf", ok, ok ? "DWARF read from binaries as stacks need it (userfaultfd)" : detail,
               ok ? "" : "each binary's DWARF copied whole when first needed (more memory)");

  utsname u{};
  uname(&u);
  printf("jankbpf --check on %s %s (%s)\n", u.sysname, u.release, u.machine);
  fputs(features.table().c_str(), stdout);
  printf("%s\n", loads ? "jankbpf can run here." : "jankbpf cannot run here: its BPF programs do not load.");
  return loads ? kExitOk : kExitFailure;
}

}  // namespace jankbpf
