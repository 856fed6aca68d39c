#include "stack/resolver.h"

#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "stack/process.h"
#include "util/log.h"
#include "util/own_clock.h"

namespace jankbpf::stack {
namespace {

// perf callchain context markers (include/uapi/linux/perf_event.h).
constexpr uint64_t kPerfContextMax = static_cast<uint64_t>(-4095);
constexpr uint64_t kPerfContextUser = static_cast<uint64_t>(-512);

bool is_kernel_address(uint64_t a) { return a >> 63; }

}  // namespace

std::string_view to_string(UnwindStop s) {
  switch (s) {
    case UnwindStop::Complete: return "complete";
    case UnwindStop::StackTruncated: return "stack_truncated";
    case UnwindStop::NoUnwindInfo: return "no_unwind_info";
    case UnwindStop::BadFrame: return "bad_frame";
    case UnwindStop::MaxDepth: return "max_depth";
    case UnwindStop::NoUserRegs: return "no_user_regs";
    case UnwindStop::BadRegisters: return "bad_registers";
    case UnwindStop::Unsupported: return "unsupported";
    case UnwindStop::NoProcess: return "no_process";
    case UnwindStop::Error: return "error";
  }
  return "error";
}

std::string_view wait_state_name(char state) {
  switch (state) {
    case 'R': return "runnable";  // preempted: off the CPU, waiting for one
    case 'S': return "sleeping";
    case 'D': return "uninterruptible";
    case 'T': return "stopped";
    case 't': return "traced";
    case 'I': return "idle";
    case 'P': return "parked";
    case 'Z': return "zombie";
    case 'X': return "dead";
    default: return "off-cpu";
  }
}

Resolver::Resolver(ResolverOptions opts)
    : opts_(std::move(opts)),
      elf_ledger_({opts_.budgets.elf_per_process, opts_.budgets.elf_per_uid, opts_.budgets.elf_total}),
      perf_map_ledger_({opts_.budgets.perf_map_per_process, opts_.budgets.perf_map_per_uid, opts_.budgets.perf_map_total}) {
  if (opts_.raise_fd_limit) {
    rlimit rl;
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
      rlim_t want = std::min<rlim_t>(rl.rlim_max, 65536);
      if (rl.rlim_cur < want) {
        rl.rlim_cur = want;
        ::setrlimit(RLIMIT_NOFILE, &rl);
      }
    }
  }
}
Resolver::~Resolver() = default;

void Resolver::invalidate(pid_t pid) { procs_.erase(pid); }

Resolver::Stats Resolver::stats() const {
  Stats s = stats_;
  s.processes = procs_.size();
  s.modules = modules_.size();
  s.module_hits = modules_.hits();
  s.module_misses = modules_.misses();
  s.module_evictions = modules_.evictions();
  s.memo_resets = modules_.memo_resets();
  s.elf_bytes_held = elf_ledger_.held();
  s.elf_bytes_high = elf_ledger_.high_water();
  s.perf_map_bytes_held = perf_map_ledger_.held();
  return s;
}

Process* Resolver::process(pid_t pid, Arch arch) {
  auto it = procs_.find(pid);
  if (it != procs_.end() && it->second->arch() != arch) {
    procs_.erase(it);
    it = procs_.end();
  }
  if (it == procs_.end()) {
    if (procs_.size() >= std::max<size_t>(1, opts_.max_processes)) {
      auto lru = std::min_element(procs_.begin(), procs_.end(), [](const auto& a, const auto& b) {
        return a.second->last_used < b.second->last_used;
      });
      procs_.erase(lru);
      ++stats_.process_evictions;
    }
    it = procs_.emplace(pid, std::make_unique<Process>(pid, arch, *this)).first;
  }
  it->second->last_used = ++use_clock_;
  return it->second.get();
}

void Resolver::prepare(pid_t pid, Arch arch, std::string early_maps) {
  Process* p = process(pid, arch);
  if (!early_maps.empty()) p->remember_maps(std::move(early_maps));
  // A process that janks again and again is pinned at every long task; its
  // maps are re-read here at most every few seconds (reading them cost
  // ~0.1 ms a task). A sample at an address outside them re-reads them at
  // once anyway (dlopen, JIT), and an exec is checked for here.
  if (p->exec_since_maps()) p->reload_maps();
  else p->maybe_refresh(opts_.pin_maps_interval);
  if (!p->has_maps()) return;
  // The cheap things that need the live process first (opening a large
  // binary's modules takes seconds, and the process may exit meanwhile).
  bool jit = std::any_of(p->maps().entries().begin(), p->maps().entries().end(),
                         [](const MapEntry& m) { return m.anon_exec(); });
  if (jit) p->hold_perf_map();
  // Opening a process's files is the costly part: bounded in time (what is
  // not opened by then is opened when a sample needs it).
  p->set_deadline(util::own_now() + opts_.budgets.parse_time);
  for (const MapEntry& m : p->maps().entries())
    if (m.x && (m.file_backed() || m.is_vdso())) p->mapped(m);
  p->set_deadline(std::chrono::steady_clock::time_point::max());
}

const Kallsyms& Resolver::kallsyms() {
  if (!kallsyms_) {
    kallsyms_ = std::make_unique<Kallsyms>(Kallsyms::load(opts_.kallsyms_path));
    kallsyms_loaded_ = std::chrono::steady_clock::now();
    kernel_build_id_ = kernel_build_id(opts_.sys_root);
  }
  return *kallsyms_;
}

std::shared_ptr<Module> Resolver::host_vdso() {
  if (vdso_tried_) return vdso_;
  vdso_tried_ = true;
  if (!opts_.vdso_path.empty()) {
    auto elf = ElfImage::open_path(opts_.vdso_path);
    if (elf) vdso_ = modules_.get(std::move(elf), "[vdso]", DebugSearch{});
    return vdso_;
  }
  uint64_t base = getauxval(AT_SYSINFO_EHDR);
  if (!base) return nullptr;
  std::string text;
  if (!read_small_file("/proc/self/maps", text)) return nullptr;
  ProcMaps self = ProcMaps::parse(text);
  const MapEntry* m = self.find(base);
  if (!m || m->end - m->start > (1u << 20)) return nullptr;
  // The vDSO is the kernel's, the same in every native process: copy ours
  // into a memfd so it is a file like any other module.
  Fd fd(memfd_create("jankbpf-vdso", MFD_CLOEXEC));
  if (!fd) return nullptr;
  const char* p = reinterpret_cast<const char*>(m->start);
  size_t left = m->end - m->start;
  while (left > 0) {
    ssize_t n = ::write(fd.get(), p, left);
    if (n <= 0) return nullptr;
    p += n;
    left -= static_cast<size_t>(n);
  }
  auto elf = ElfImage::open(std::move(fd));
  if (!elf) return nullptr;
  vdso_ = modules_.get(std::move(elf), "[vdso]", DebugSearch{});
  return vdso_;
}

void Resolver::kernel_frames(const SampleInput& in, ResolvedStack& out) {
  // Sized first: a perf callchain may go on with user pcs, not kept here.
  size_t n = 0;
  for (uint64_t addr : in.kernel_callchain) {
    if (addr == kPerfContextUser) break;
    n += addr < kPerfContextMax && is_kernel_address(addr);
  }
  out.frames.reserve(n);
  bool first = true;
  for (uint64_t addr : in.kernel_callchain) {
    if (addr == kPerfContextUser) break;
    if (addr >= kPerfContextMax || !is_kernel_address(addr)) continue;
    const Kallsyms& ks = kallsyms();
    uint64_t lookup = first ? addr : addr - 1;
    first = false;
    auto hit = ks.lookup(lookup);
    if (!hit && std::chrono::steady_clock::now() - kallsyms_loaded_ > std::chrono::seconds(10)) {
      kallsyms_.reset();  // a module loaded since: read the table again
      hit = kallsyms().lookup(lookup);
    }
    Frame f;
    f.pc = addr;
    f.flags = kFrameKernel;
    f.module_offset = addr;
    if (hit) {
      f.symbol.assign(hit->name);
      f.symbol_offset = addr - (lookup - hit->offset);
      f.module_offset = hit->module_offset + (addr - lookup);
      if (hit->module.empty()) {
        f.module = "[kernel.kallsyms]";
        f.build_id = kernel_build_id_;
      } else {
        std::string mod(hit->module);
        f.module = "[" + mod + "]";
        auto [it, inserted] = kmod_build_ids_.try_emplace(mod);
        if (inserted) it->second = kernel_module_build_id(mod, opts_.sys_root);
        f.build_id = it->second;
      }
    } else {
      f.module = "[kernel]";
    }
    out.frames.push_back(std::move(f));
  }
  out.kernel_frames = out.frames.size();
}

namespace {

// The end of a sample's DWARF slice, read from the clock (a schedstat
// read) only once a module still has DWARF to copy: warm samples never do.
class DwarfDeadline {
 public:
  explicit DwarfDeadline(std::chrono::milliseconds slice) : slice_(slice) {}
  std::chrono::steady_clock::time_point get() {
    if (!at_) at_ = util::own_now() + slice_;
    return *at_;
  }

 private:
  std::chrono::milliseconds slice_;
  std::optional<std::chrono::steady_clock::time_point> at_;
};

void append_user_frames(Process& p, const ResolverOptions& opts, uint64_t pc, bool activation,
                        std::vector<Frame>& out, uint32_t& budgets, DwarfDeadline& until) {
  uint64_t lookup = activation ? pc : pc - 1;
  const MapEntry* m = p.maps().find(lookup);
  Frame base;
  base.pc = pc;
  base.module_offset = pc;
  if (!m) {
    out.push_back(std::move(base));
    return;
  }
  if (m->anon_exec()) {
    base.flags |= kFrameJit;
    const PerfMap::Entry* e = p.jit_lookup(lookup);
    if (!e) budgets |= p.perf_map_budget();  // unnamed, maybe for want of room
    if (e) {
      JitSymbol j = parse_jit_name(e->name);
      base.symbol = std::move(j.function);
      base.symbol_offset = pc - e->start;
      base.file = std::move(j.file);
      base.line = j.line;
      base.column = j.column;
    }
    out.push_back(std::move(base));
    return;
  }
  base.module = m->path;
  const Process::Mapped& mp = (m->file_backed() || m->is_vdso()) ? p.mapped(*m) : Process::Mapped{};
  budgets |= mp.budget | (mp.module ? mp.module->budget_cut() : 0);
  if (!mp.module) {
    // Cannot open it: keep what names the place offline (path + offset).
    base.module_offset = pc - m->start + m->pgoff;
    out.push_back(std::move(base));
    return;
  }
  base.build_id = mp.module->build_id();
  base.module_offset = pc - mp.bias;
  const bool dwarf_pending = opts.source_lines && !mp.module->dwarf_settled();
  const Symbolized& s = mp.module->symbolize(lookup - mp.bias, opts.source_lines,
                                             dwarf_pending ? until.get() : std::chrono::steady_clock::time_point::max());
  for (size_t i = 0; i < s.frames.size(); i++) {
    const SymbolizedFrame& sf = s.frames[i];
    // The physical frame (last) takes base itself: its module and build-id
    // are copied only for the inlined frames before it.
    Frame f = i + 1 < s.frames.size() ? base : std::move(base);
    f.symbol = sf.function;
    f.file = sf.file;
    f.line = sf.line;
    f.column = sf.column;
    if (sf.inlined) {
      f.flags |= kFrameInlined;
    } else if (sf.has_start && f.module_offset >= sf.function_start) {
      f.symbol_offset = f.module_offset - sf.function_start;
    }
    out.push_back(std::move(f));
  }
}

}  // namespace

const ProcMaps* Resolver::known_maps(pid_t pid) const {
  auto it = procs_.find(pid);
  return it != procs_.end() && it->second->has_maps() ? &it->second->maps() : nullptr;
}

std::vector<Frame> Resolver::symbolize_user(pid_t pid, Arch arch, std::span<const uint64_t> pcs) {
  std::vector<Frame> out;
  DwarfDeadline dwarf_until(opts_.budgets.dwarf_slice);
  Process* p = process(pid, arch);
  // A PC outside the known mappings may be in a library mapped since.
  bool unknown = !p->has_maps();
  for (uint64_t pc : pcs) unknown = unknown || !p->maps().find(pc);
  if (unknown) p->maybe_refresh();
  if (!p->has_maps()) {
    for (uint64_t pc : pcs) {
      Frame f;
      f.pc = pc;
      f.module_offset = pc;
      out.push_back(std::move(f));
    }
    return out;
  }
  for (size_t i = 0; i < pcs.size() && out.size() < opts_.max_frames; i++) {
    // A walk that left executable memory followed a register that was not
    // a frame pointer: what comes after is not a stack.
    const MapEntry* m = p->maps().find(i == 0 ? pcs[i] : pcs[i] - 1);
    if (!m || !m->x) break;
    append_user_frames(*p, opts_, pcs[i], i == 0, out, budgets_scratch_, dwarf_until);
  }
  return out;
}

ResolvedStack Resolver::resolve(const SampleInput& in) {
  ResolvedStack out;
  out.pid = in.pid;
  out.tid = in.tid;
  out.wait_state = in.wait_state;
  ++stats_.samples;
  kernel_frames(in, out);

  auto fail = [&](UnwindStop stop, std::string why) {
    out.stop = stop;
    out.truncated = true;
    out.error = std::move(why);
    if (!out.frames.empty()) out.frames.back().flags |= kFrameTruncated;
    return out;
  };
  auto abi = static_cast<RegsAbi>(in.regs_abi);
  if (abi == RegsAbi::None || in.regs.empty()) return fail(UnwindStop::NoUserRegs, "no user registers");
  if (abi != RegsAbi::Abi64) return fail(UnwindStop::Unsupported, "32-bit user ABI");
  auto regs = decode_user_regs(in.arch, in.regs_mask, in.regs);
  if (!regs) return fail(UnwindStop::BadRegisters, "registers do not match the mask");

  Process* p = process(in.pid, in.arch);
  Process::Unwound u = p->unwind(in, *regs);
  if (!p->has_maps()) {
    Frame f;
    f.pc = regs->pc;
    f.module_offset = regs->pc;
    out.frames.push_back(std::move(f));
    return fail(UnwindStop::NoProcess, "cannot read /proc/" + std::to_string(in.pid) + "/maps");
  }
  // DWARF still to copy gets a slice of this sample's time, not more.
  DwarfDeadline dwarf_until(opts_.budgets.dwarf_slice);
  // One frame a pc but for inlined calls: no regrowth (each a move of
  // every Frame so far) on the common path.
  out.frames.reserve(out.frames.size() + u.pcs.size());
  for (const auto& up : u.pcs)
    append_user_frames(*p, opts_, up.pc, up.activation, out.frames, out.budgets, dwarf_until);
  out.stop = u.stop;
  out.error = std::move(u.error);
  out.truncated = u.stop != UnwindStop::Complete;
  if (out.truncated && !out.frames.empty()) out.frames.back().flags |= kFrameTruncated;
  return out;
}

}  // namespace jankbpf::stack
