// A HotSpot JVM in a process: libjvm.so, whatever its path, by the
// gHotSpotVM* tables it exports (runtime_find.h finds the module), and
// from its full symbol table when it has one (Debian's has) the statics
// that tell the JVM's own pauses: the safepoint state, the VM thread's
// current operation and the vtables naming VM operations.
#pragma once

#include <memory>
#include <string>

#include "runtime/hotspot_frames.h"
#include "runtime/hotspot_layout.h"
#include "runtime/mem_reader.h"

struct Elf;

namespace jankbpf::runtime {

struct HotSpotTarget {
  HotSpotLayout layout;
  JvmSymbols syms;
  bool arm64 = false;
  std::string release;  // "17.0.15+6-Debian-1deb12u1", "" unread
};

// The pause statics and VM operation vtables from `elf`'s .symtab (ELF
// virtual addresses); left empty without one. Bounded like .dynsym.
void jvm_symtab(Elf* elf, JvmSymbols& out);

// The tables read through `mem` (the live process) at the exports' process
// addresses, and `syms` already moved by the load bias; the JVM's port is
// jankbpf's own. nullptr, with `why`.
std::unique_ptr<HotSpotTarget> hotspot_target(MemReader& mem, const HotSpotExports& exports, JvmSymbols syms,
                                              std::string* why);

}  // namespace jankbpf::runtime
