#include "bpf/features.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/kernel_config.h"
#include "util/log.h"

namespace jankbpf {

void FeatureSet::set(const std::string& name, bool ok, std::string detail, std::string fallback) {
  for (auto& f : items_) {
    if (f.name == name) {
      f = {name, ok, std::move(detail), std::move(fallback)};
      return;
    }
  }
  items_.push_back({name, ok, std::move(detail), std::move(fallback)});
}

const Feature* FeatureSet::find(const std::string& name) const {
  for (const auto& f : items_)
    if (f.name == name) return &f;
  return nullptr;
}

bool FeatureSet::ok(const std::string& name) const {
  const Feature* f = find(name);
  return f && f->ok;
}

void FeatureSet::set_off(const std::string& name, std::string detail) {
  set(name, false, std::move(detail));
  for (auto& f : items_)
    if (f.name == name) f.off = true;
}

std::vector<std::string> FeatureSet::missing() const {
  std::vector<std::string> out;
  for (const auto& f : items_)
    if (!f.ok && !f.off) out.push_back(f.name);
  return out;
}

std::string FeatureSet::table() const {
  size_t width = 0;
  for (const auto& f : items_) width = std::max(width, f.name.size());
  std::string out;
  for (const auto& f : items_) {
    out += f.name;
    out.append(width + 2 - f.name.size(), ' ');
    out += f.ok ? "yes  " : f.off ? "off  " : "NO   ";
    out += f.detail;
    if (!f.ok && !f.fallback.empty()) out += "; instead: " + f.fallback;
    out += '\n';
  }
  return out;
}

namespace {
void warn(const Feature& f) {
  log::warn("%s not available on this kernel (%s)%s%s", f.name.c_str(), f.detail.c_str(),
            f.fallback.empty() ? "" : "; using ", f.fallback.c_str());
}
}  // namespace

void FeatureSet::warn_missing() const {
  for (const auto& f : items_)
    if (!f.ok && !f.off) warn(f);
}

void FeatureSet::warn_missing(const std::string& name) const {
  if (const Feature* f = find(name); f && !f->ok && !f->off) warn(*f);
}

bool disabled_by_env(const char* name) {
  const char* env = getenv("JANKBPF_DISABLE");
  if (!env) return false;
  std::string list = std::string(",") + env + ",";
  return list.find(std::string(",") + name + ",") != std::string::npos;
}

namespace probe {

bool trampoline(const KernelFuncs& kernel, const std::string& function, std::string* detail) {
  if (!kernel.ok()) {
    *detail = "cannot read the kernel's BTF: " + kernel.error();
    return false;
  }
  uint32_t id = kernel.id(function);
  if (id == 0) {
    *detail = function + " is not in the kernel's BTF";
    return false;
  }
  // return 0: the smallest program a trampoline can run.
  const bpf_insn insns[] = {
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = 0},
      {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
  };
  LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_TRACE_FENTRY,
              .attach_btf_id = id);
  int prog = bpf_prog_load(BPF_PROG_TYPE_TRACING, "jb_probe_fentry", "GPL", insns, 2, &opts);
  if (prog < 0) {
    *detail = "loading an fentry program on " + function + ": " + strerror(errno);
    return false;
  }
  int link = bpf_raw_tracepoint_open(nullptr, prog);
  int err = errno;
  close(prog);
  if (link < 0) {
    *detail = "attaching an fentry program to " + function + ": " + strerror(err);
    return false;
  }
  close(link);
  *detail = "fentry/fexit attach to the syscalls' kernel functions";
  return true;
}

bool perf_user_stacks(uint64_t regs_mask, uint32_t stack_bytes, std::string* detail) {
  if (disabled_by_env("perf_sampling")) {
    *detail = "perf_sampling disabled by JANKBPF_DISABLE";
    return false;
  }
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.sample_period = 10'000'000;
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER |
                     PERF_SAMPLE_STACK_USER | PERF_SAMPLE_CALLCHAIN;
  attr.sample_regs_user = regs_mask;
  attr.sample_stack_user = stack_bytes;
  attr.exclude_callchain_user = 1;
  attr.disabled = 1;
  int err = ENODEV;
  for (int cpu = 0; cpu < 4096; cpu++) {
    int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd >= 0) {
      close(fd);
      *detail = "cpu-clock events with user registers and a " + std::to_string(stack_bytes) +
                "-byte user stack copy";
      return true;
    }
    err = errno;
    if (err != ENODEV) break;  // ENODEV: an offline CPU, try the next
  }
  *detail = std::string("perf_event_open with user registers and stack: ") + strerror(err);
  return false;
}

bool uprobes(std::string* detail) {
  struct stat st{};
  bool ok = stat("/sys/bus/event_source/devices/uprobe/type", &st) == 0;
  *detail = ok ? "the uprobe PMU is registered" : "no uprobe PMU (CONFIG_UPROBE_EVENTS)";
  return ok;
}

bool trace_cmd(std::string* detail) {
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/trace-cmd";
    if (end > start && access(candidate.c_str(), X_OK) == 0) {
      *detail = candidate;
      return true;
    }
    start = end + 1;
  }
  *detail = "trace-cmd is not on PATH";
  return false;
}

uint32_t tick_rate_of(const std::string& config_text) {
  const std::string v = config_value(config_text, "HZ");
  if (v.empty() || v.size() > 5 || v.find_first_not_of("0123456789") != std::string::npos) return 0;
  const unsigned long hz = std::stoul(v);
  // Kconfig offers 24 to 1200 across the arches; anything else is not a tick rate.
  return hz >= 10 && hz <= 10000 ? static_cast<uint32_t>(hz) : 0;
}

uint32_t tick_rate(std::string* detail) {
  if (disabled_by_env("tick_rate")) {
    *detail = "disabled by JANKBPF_DISABLE";
    return 0;
  }
  std::string text, where, error;
  if (!read_kernel_config(&text, &where, &error)) {
    *detail = "no kernel config to read (" + error + ")";
    return 0;
  }
  const uint32_t hz = tick_rate_of(text);
  *detail = hz ? "CONFIG_HZ=" + std::to_string(hz) + " (" + where + ")"
               : where + " has no usable CONFIG_HZ";
  return hz;
}

}  // namespace probe
}  // namespace jankbpf
