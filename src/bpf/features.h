// What this kernel gives jankbpf, found by trying (loading, opening), never
// by version numbers. Each entry says what was tried and, when it failed,
// what jankbpf does instead; `--check` prints the table, the summary names
// what is missing, and each fallback is said once on stderr.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bpf/kernel_funcs.h"


namespace jankbpf {

struct Feature {
  std::string name;      // stable identifier, e.g. "bpf_timer", "task_storage"
  bool ok = false;
  std::string detail;    // what was found, or why it failed
  std::string fallback;  // what is used instead ("" when ok, or nothing replaces it)
  bool off = false;      // not used because no option asked for it: not missing, no warning
};

class FeatureSet {
 public:
  // Records a result; a second result for the same name replaces the first.
  void set(const std::string& name, bool ok, std::string detail, std::string fallback = "");
  // A feature an option turns on, not asked for: `--check` says "off".
  void set_off(const std::string& name, std::string detail);
  const Feature* find(const std::string& name) const;
  bool ok(const std::string& name) const;
  std::vector<std::string> missing() const;
  const std::vector<Feature>& all() const { return items_; }
  // The --check table: one line per feature.
  std::string table() const;
  // One stderr line per missing feature (warnings), for the start of a run.
  void warn_missing() const;
  // The same for one feature found later (the trace recorder's), if missing.
  void warn_missing(const std::string& name) const;

 private:
  std::vector<Feature> items_;
};

// Features named in $JANKBPF_DISABLE (comma-separated) are treated as
// missing, so the fallbacks of other kernels can be tested on this one.
bool disabled_by_env(const char* name);

// Probes that need no BPF object of ours.
namespace probe {
// A BPF trampoline (fentry) can be loaded on and attached to `function`;
// it is detached again at once.
bool trampoline(const KernelFuncs& kernel, const std::string& function, std::string* detail);
// A cpu-clock perf event with user registers and a user stack copy of
// `stack_bytes`, opened disabled on the first online CPU and closed again.
bool perf_user_stacks(uint64_t regs_mask, uint32_t stack_bytes, std::string* detail);
// The uprobe PMU (markers) is registered.
bool uprobes(std::string* detail);
// trace-cmd on PATH (traces are saved as text without it).
bool trace_cmd(std::string* detail);
// The kernel's tick rate (CONFIG_HZ) from its config, 0 when unknown: with
// it a short task's end is told by jiffies, without a clock read.
uint32_t tick_rate(std::string* detail);
// CONFIG_HZ of a config file's text, 0 when absent or not a tick rate.
uint32_t tick_rate_of(const std::string& config_text);
}  // namespace probe

}  // namespace jankbpf
