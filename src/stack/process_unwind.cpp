// Process, part two: the libdwfl session of a process and the unwinding of
// one sample through it -- registers and the copied stack fed to libdwfl's
// callbacks, each frame checked, and the fallbacks where CFI ends (frameless
// leaves, arm64 PLT stubs, JIT frame records). Maps and modules: process.cpp.
#include "stack/process.h"

#include <dwarf.h>
#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "stack/arm64_code.h"
#include "stack/resolver.h"
#include "util/log.h"

namespace jankbpf::stack {

// The sample being unwound, and what the callbacks learned about it.
struct Process::Ctx {
  const SampleInput* in = nullptr;
  const UserRegs* regs = nullptr;
  uint64_t sp = 0, window = 0;  // copied stack: [sp, sp + window)
  const MapEntry* stack_map = nullptr;
  unsigned max_frames = 128;
  std::vector<UnwoundPc> pcs;
  uint64_t prev_sp = 0;
  bool have_prev_sp = false;
  // What the unwind step after the last reported frame ran into.
  bool step_off_window = false, step_bad_read = false;
  // The next callback is the initial frame of a libdwfl run; `resumed`:
  // that run restarts from a caller frame we already recorded.
  bool run_first = true, resumed = false;
  // arm64: a JIT frame was reached; we walk frame records from here.
  bool jit_walk = false;
  // arm64: the sample's pc is in a frameless leaf without CFI; libdwfl
  // resumes at its caller (c.synthetic) with the caller already recorded.
  bool leaf_resume = false;
  uint64_t jit_fp = 0;
  UserRegs synthetic;
  bool stopped = false;
  UnwindStop stop = UnwindStop::Complete;
  std::string error;
  bool unknown_pc = false;
};


bool Process::ensure_dwfl() {
  if (dwfl_) return true;
  if (dwfl_failed_) return false;
  static const Dwfl_Thread_Callbacks kCallbacks = {
      .next_thread = cb_next_thread,
      .get_thread = cb_get_thread,
      .memory_read = cb_memory_read,
      .set_initial_registers = cb_set_initial_registers,
      .detach = nullptr,
      .thread_detach = nullptr,
  };
  // libdwfl picks the unwinder backend (register count, frame-pointer
  // fallback) from an ELF header; a bare one with the sample's machine
  // keeps that independent of which modules are reported.
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_CORE;
  eh.e_machine = regs_.e_machine;
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  static_assert(sizeof eh == sizeof arch_elf_image_);
  std::memcpy(arch_elf_image_, &eh, sizeof eh);
  elf_version(EV_CURRENT);
  arch_elf_ = elf_memory(reinterpret_cast<char*>(arch_elf_image_), sizeof arch_elf_image_);
  dwfl_ = dwfl_begin(module_dwfl_callbacks());
  if (!arch_elf_ || !dwfl_) {
    drop_dwfl();
    dwfl_failed_ = true;
    return false;
  }
  dwfl_report_begin(dwfl_);
  dwfl_report_end(dwfl_, nullptr, nullptr);
  if (!dwfl_attach_state(dwfl_, arch_elf_, pid_, &kCallbacks, this)) {
    drop_dwfl();
    dwfl_failed_ = true;
    return false;
  }
  reported_.clear();
  return true;
}

void Process::drop_dwfl() {
  if (dwfl_) dwfl_end(dwfl_);
  dwfl_ = nullptr;
  if (arch_elf_) elf_end(arch_elf_);
  arch_elf_ = nullptr;
  reported_.clear();
  dwfl_failed_ = false;
}

// Reports the module mapped at addr to the Dwfl, once (lazily, as perf
// does: only modules some sample touches are ever opened).
void Process::report(uint64_t addr) {
  const MapEntry* m = maps_.find(addr);
  if (!m || reported_.count(m->start)) return;
  reported_.insert(m->start);
  const Mapped& mp = mapped(*m);
  if (!mp.module) return;
  // Every mapping of one file shares the module: report it once.
  uint64_t key = mp.bias ^ (reinterpret_cast<uintptr_t>(mp.module.get()) << 1);
  if (reported_.count(key | 1)) return;
  reported_.insert(key | 1);
  dwfl_report_begin_add(dwfl_);
  // libdwfl reads the module's private copy (its CFI), never the file.
  report_image(dwfl_, mp.module->elf(), mp.bias, m->path.c_str());
  dwfl_report_end(dwfl_, nullptr, nullptr);
}

bool Process::read_word(uint64_t addr, uint64_t* out) {
  Ctx& c = *ctx_;
  if (addr >= c.sp && c.window >= 8 && addr - c.sp <= c.window - 8) {
    std::memcpy(out, c.in->stack.data() + (addr - c.sp), 8);
    // Saved return addresses carry PAC bits on arm64; other saved values
    // are left alone unless stripping lands them in code.
    *out = strip_pac(*out);
    return true;
  }
  if (addr >= c.sp + c.window && c.stack_map && c.stack_map->contains(addr)) {
    c.step_off_window = true;
    return false;
  }
  // Read-only file-backed memory holds what the file holds.
  if (const MapEntry* m = maps_.find(addr); m && !m->w && (m->file_backed() || m->is_vdso())) {
    const Mapped& mp = mapped(*m);
    if (mp.module && mp.module->elf().read(addr - m->start + m->pgoff, out, 8)) return true;
  }
  c.step_bad_read = true;
  return false;
}

pid_t Process::cb_next_thread(Dwfl*, void* arg, void** thread_argp) {
  if (*thread_argp) return 0;
  auto* self = static_cast<Process*>(arg);
  *thread_argp = self;
  return self->ctx_ && self->ctx_->in->tid > 0 ? self->ctx_->in->tid : self->pid_;
}

bool Process::cb_get_thread(Dwfl*, pid_t, void* arg, void** thread_argp) {
  *thread_argp = arg;
  return true;
}

bool Process::cb_memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* arg) {
  auto* self = static_cast<Process*>(arg);
  if (!self->ctx_) return false;
  uint64_t v = 0;
  if (!self->read_word(addr, &v)) return false;
  *result = v;
  return true;
}

bool Process::cb_set_initial_registers(Dwfl_Thread* thread, void* arg) {
  auto* self = static_cast<Process*>(arg);
  if (!self->ctx_) return false;
  const UserRegs& r = *self->ctx_->regs;
  const RegTable& t = self->regs_;
  for (unsigned d = 0; d < t.dwarf_count; ++d) {
    if (!(r.dwarf_valid & (uint64_t{1} << d))) continue;
    Dwarf_Word v = r.dwarf[d];
    if (static_cast<int>(d) == t.lr_dwarf) v = self->strip_pac(v);
    if (!dwfl_thread_state_registers(thread, static_cast<int>(d), 1, &v)) return false;
  }
  if (t.pc_dwarf < 0) dwfl_thread_state_register_pc(thread, r.pc);
  return true;
}

int Process::cb_frame(Dwfl_Frame* state, void* arg) {
  return static_cast<Process*>(arg)->on_frame(state);
}

int Process::on_frame(Dwfl_Frame* state) {
  Ctx& c = *ctx_;
  // Flags from here on describe the step that unwinds *this* frame.
  c.step_off_window = c.step_bad_read = false;
  bool initial = c.run_first;
  c.run_first = false;
  Dwarf_Addr pc = 0;
  if (!dwfl_frame_pc(state, &pc, nullptr)) {
    c.stopped = true;
    c.stop = UnwindStop::Error;
    c.error = dwfl_errmsg(-1);
    return DWARF_CB_ABORT;
  }
  pc = strip_pac(pc);
  bool first = c.pcs.empty();
  uint64_t lookup = first ? pc : pc - 1;
  if (initial && c.resumed) lookup = pc;  // already the call instruction
  const MapEntry* m = maps_.find(lookup);
  if (!m) c.unknown_pc = true;
  if (!first && (pc == 0 || !m || !m->x)) {
    // A "return address" outside code: garbage, not a frame.
    c.stopped = true;
    c.stop = UnwindStop::BadFrame;
    char buf[64];
    std::snprintf(buf, sizeof buf, "return address %#" PRIx64 " is not in code", pc);
    c.error = buf;
    return DWARF_CB_ABORT;
  }
  Dwarf_Word sp = 0;
  bool have_sp = dwfl_frame_reg(state, static_cast<unsigned>(regs_.sp_dwarf), &sp) == 0;
  if (!first && have_sp && c.have_prev_sp && !(initial && c.resumed)) {
    if (sp < c.prev_sp || (sp == c.prev_sp && pc == c.pcs.back().pc)) {
      c.stopped = true;
      c.stop = UnwindStop::BadFrame;
      c.error = "stack pointer did not move up";
      return DWARF_CB_ABORT;
    }
  }
  if (have_sp) {
    c.prev_sp = sp;
    c.have_prev_sp = true;
  }
  // Report before asking for isactivation: answering it unwinds one step,
  // which needs this frame's module (and its CFI) already known.
  report(lookup);
  if (lookup != pc) report(pc);
  if (initial && c.resumed) return DWARF_CB_OK;  // recorded by the frame walk
  if (first && regs_.arch == Arch::Arm64 && m && leaf_without_cfi(*m, pc)) return leaf_to_caller(pc);
  if (!first && m->anon_exec() && regs_.arch == Arch::Arm64) {
    // libdwfl's arm64 fallback takes LR as this frame's return address,
    // which only holds for a leaf; walk the frame records ourselves.
    c.pcs.push_back({pc, false});
    Dwarf_Word fp = 0;
    if (dwfl_frame_reg(state, static_cast<unsigned>(regs_.fp_dwarf), &fp) != 0) fp = 0;
    c.jit_walk = true;
    c.jit_fp = fp;
    return DWARF_CB_ABORT;
  }
  bool activation = first;
  if (!first) {
    Dwarf_Addr pc2;
    bool act = false;
    if (dwfl_frame_pc(state, &pc2, &act)) activation = act;
  }
  c.pcs.push_back({pc, activation});
  if (c.pcs.size() >= c.max_frames) {
    c.stopped = true;
    c.stop = UnwindStop::MaxDepth;
    c.error = "frame limit reached";
    return DWARF_CB_ABORT;
  }
  return DWARF_CB_OK;
}

// Some CFI (.eh_frame or .debug_frame) of its module covers pc.
bool Process::has_cfi(uint64_t pc) {
  Dwfl_Module* mod = dwfl_addrmodule(dwfl_, pc);
  if (!mod) return false;
  Dwarf_Addr bias = 0;
  Dwarf_Frame* frame = nullptr;
  if (Dwarf_CFI* cfi = dwfl_module_eh_cfi(mod, &bias); cfi && dwarf_cfi_addrframe(cfi, pc - bias, &frame) == 0) {
    std::free(frame);
    return true;
  }
  if (Dwarf_CFI* cfi = dwfl_module_dwarf_cfi(mod, &bias); cfi && dwarf_cfi_addrframe(cfi, pc - bias, &frame) == 0) {
    std::free(frame);
    return true;
  }
  return false;
}

// arm64: pc (the sample's) lies in a function of a mapped file (or the
// vDSO) that has no CFI and never touches SP or x30 (a64_frameless_leaf
// over its whole symbol). libdwfl's fallback for a pc without CFI takes LR
// as the return address but also pops a frame record at x29 -- in a leaf
// that record is the caller's, so the caller's CFI then runs on the
// grandparent's SP and reads junk. Such a leaf is unwound here instead.
// Memoized per function (an FDE covers a whole function, or none does).
bool Process::leaf_without_cfi(const MapEntry& m, uint64_t pc) {
  if (!m.x || m.anon_exec() || !(m.file_backed() || m.is_vdso())) return false;
  const Mapped& mp = mapped(m);
  if (!mp.module) return false;
  const ElfSymbol* sym = lookup_symbol(mp.module->elf().symbols(), pc - mp.bias);
  // No sized symbol covers a PLT stub (at most a sizeless _init before it).
  if (!sym || sym->size == 0) return in_plt_stub(m, mp, pc);
  if (sym->size < 4 || sym->size > 65536) return false;
  uint64_t start = sym->addr + mp.bias;
  auto it = leaf_memo_.find(start);
  if (it != leaf_memo_.end()) return it->second;
  bool leaf = false;
  if (m.contains(start) && m.contains(start + sym->size - 1) && !has_cfi(pc)) {
    std::vector<uint32_t> code(sym->size / 4);
    leaf = mp.module->elf().read(start - m.start + m.pgoff, code.data(), code.size() * 4) &&
           a64_frameless_leaf(code);
  }
  leaf_memo_.emplace(start, leaf);
  return leaf;
}

// arm64: pc lies in a PLT stub without CFI (see a64_plt_stub_at): a call
// on its way to another module, caught between the bl and the br.
bool Process::in_plt_stub(const MapEntry& m, const Mapped& mp, uint64_t pc) {
  if (pc & 3) return false;
  const uint64_t lo = std::max(m.start, pc >= 12 ? pc - 12 : 0);
  const uint64_t hi = std::min(m.end, pc + 16);
  if (hi < lo + 16) return false;
  std::vector<uint32_t> code((hi - lo) / 4);
  if (!mp.module->elf().read(lo - m.start + m.pgoff, code.data(), code.size() * 4)) return false;
  return a64_plt_stub_at(code, (pc - lo) / 4) >= 0 && !has_cfi(pc);
}

// Records the leaf and its caller (at LR) and restarts libdwfl at the
// caller's call instruction with every other register as sampled: in a
// frameless leaf SP, x29 and the callee-saved registers are the caller's.
int Process::leaf_to_caller(uint64_t pc) {
  Ctx& c = *ctx_;
  c.pcs.push_back({pc, true});
  uint64_t ret = c.regs->has_lr ? strip_pac(c.regs->lr) : 0;
  const MapEntry* rm = ret > 4 ? maps_.find(ret - 4) : nullptr;
  if (!rm || !rm->x) {
    if (ret > 4 && !rm) c.unknown_pc = true;
    c.stopped = true;
    c.stop = UnwindStop::BadFrame;
    char buf[64];
    std::snprintf(buf, sizeof buf, "link register %#" PRIx64 " is not in code", ret);
    c.error = buf;
    return DWARF_CB_ABORT;
  }
  if (rm->anon_exec()) {
    // Called from JIT code: its frame record is at x29.
    c.pcs.push_back({ret, false});
    c.jit_walk = true;
    c.jit_fp = c.regs->fp;
    return DWARF_CB_ABORT;
  }
  c.pcs.push_back({ret, false});
  if (c.pcs.size() >= c.max_frames) {
    c.stopped = true;
    c.stop = UnwindStop::MaxDepth;
    c.error = "frame limit reached";
    return DWARF_CB_ABORT;
  }
  UserRegs& r = c.synthetic;
  r = *c.regs;
  r.pc = ret - 4;  // the bl/blr: the caller's CFI row
  c.regs = &r;
  c.leaf_resume = true;
  return DWARF_CB_ABORT;
}

// arm64 JIT frames: follow frame records (x29 -> {caller x29, return
// address}) until a return address lands in a mapped binary, then hand
// that frame back to libdwfl as a fresh initial state (pc at the call
// instruction, sp above the record, x29 the caller's). Returns false when
// the walk ended the stack (c.stop set).
bool Process::walk_jit_frames() {
  Ctx& c = *ctx_;
  uint64_t fp = c.jit_fp;
  for (;;) {
    c.step_off_window = c.step_bad_read = false;
    uint64_t ret = 0, next_fp = 0;
    if (fp == 0 || fp < c.prev_sp || !read_word(fp + 8, &ret) || !read_word(fp, &next_fp)) {
      c.stopped = true;
      if (c.step_off_window) {
        c.stop = UnwindStop::StackTruncated;
        c.error = "unwinding needs memory above the copied stack";
      } else {
        c.stop = UnwindStop::NoUnwindInfo;
        c.error = "JIT frame without a usable frame record";
      }
      return false;
    }
    ret = strip_pac(ret);
    const MapEntry* m = ret > 4 ? maps_.find(ret - 4) : nullptr;
    if (!m || !m->x) {
      if (!m) c.unknown_pc = true;
      c.stopped = true;
      c.stop = UnwindStop::BadFrame;
      c.error = "JIT frame record holds no return address";
      return false;
    }
    c.pcs.push_back({ret, false});
    c.prev_sp = fp + 16;
    c.have_prev_sp = true;
    if (c.pcs.size() >= c.max_frames) {
      c.stopped = true;
      c.stop = UnwindStop::MaxDepth;
      c.error = "frame limit reached";
      return false;
    }
    if (m->anon_exec()) {
      if (next_fp <= fp) {
        c.stopped = true;
        c.stop = UnwindStop::BadFrame;
        c.error = "frame records do not go up the stack";
        return false;
      }
      fp = next_fp;
      continue;
    }
    UserRegs& r = c.synthetic;
    r = UserRegs{};
    r.arch = arch_;
    r.pc = ret - 4;  // the bl/blr: the caller's CFI row, even before a noreturn end
    r.sp = fp + 16;
    r.has_pc = r.has_sp = true;
    r.dwarf[static_cast<size_t>(regs_.sp_dwarf)] = r.sp;
    r.dwarf[static_cast<size_t>(regs_.fp_dwarf)] = next_fp;
    r.dwarf_valid = (uint64_t{1} << regs_.sp_dwarf) | (uint64_t{1} << regs_.fp_dwarf);
    c.regs = &r;
    return true;
  }
}

Process::Unwound Process::unwind_once(const SampleInput& in, const UserRegs& regs) {
  Unwound out;
  if (!ensure_dwfl()) {
    out.stop = UnwindStop::Error;
    out.error = "cannot start a libdwfl session";
    out.pcs.push_back({regs.pc, true});
    return out;
  }
  Ctx c;
  c.in = &in;
  c.regs = &regs;
  c.sp = regs.sp;
  c.window = std::min<uint64_t>(in.stack.size(), in.stack_dyn_size);
  if (c.sp + c.window < c.sp) c.window = 0;  // wraps: junk SP
  c.stack_map = maps_.find(regs.sp);
  c.max_frames = std::max(1u, owner_.options().max_frames);
  ctx_ = &c;
  pid_t tid = in.tid > 0 ? in.tid : pid_;
  int rc = dwfl_getthread_frames(dwfl_, tid, cb_frame, this);
  while ((c.jit_walk || c.leaf_resume) && !c.stopped) {
    if (c.jit_walk) {
      c.jit_walk = false;
      if (!walk_jit_frames()) break;
    }
    c.leaf_resume = false;
    c.run_first = true;
    c.resumed = true;
    rc = dwfl_getthread_frames(dwfl_, tid, cb_frame, this);
  }
  ctx_ = nullptr;

  out.pcs = std::move(c.pcs);
  out.unknown_pc = c.unknown_pc;
  if (c.stopped) {
    out.stop = c.stop;
    out.error = std::move(c.error);
  } else if (c.step_off_window) {
    out.stop = UnwindStop::StackTruncated;
    out.error = "unwinding needs memory above the copied stack";
  } else if (rc == 0 && c.step_bad_read) {
    // libdwfl ends quietly when the return address cannot be read.
    out.stop = UnwindStop::BadFrame;
    out.error = "return address unreadable";
  } else if (rc == 0) {
    out.stop = UnwindStop::Complete;
  } else {
    out.stop = UnwindStop::NoUnwindInfo;
    out.error = dwfl_errmsg(-1);
  }
  if (out.pcs.empty()) out.pcs.push_back({regs.pc, true});
  return out;
}

Process::Unwound Process::unwind(const SampleInput& in, const UserRegs& regs) {
  if (!maps_loaded_) reload_maps();
  if (!maps_.find(regs.pc)) maybe_refresh();  // new mapping (dlopen, JIT) or exec
  Unwound out = unwind_once(in, regs);
  if (out.unknown_pc && maybe_refresh()) out = unwind_once(in, regs);
  return out;
}

}  // namespace jankbpf::stack
