// Finds the runtimes whose frames are read -- CPython and V8 -- in a
// process by their symbols, cheaply enough to run on the
// ring thread when a process's first sample arrives (the frames of that
// sample can only be read then): libelf in ELF_C_READ mode reads just the
// headers, .dynsym and its strings with pread (no copy of the file, no
// mapping a truncated file could fault), each file once per jankbpf run.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/hotspot_find.h"
#include "runtime/python_frames.h"
#include "runtime/v8_layout.h"

namespace jankbpf::runtime {

// What one ELF file exports that matters here (ELF virtual addresses).
struct RuntimeSymbols {
  uint64_t runtime = 0, version = 0, code_type = 0, unicode_type = 0, bytes_type = 0;
  // V8's postmortem constants (v8dbg_ prefix dropped) and their values.
  std::vector<std::pair<std::string, int64_t>> v8dbg;
  // HotSpot's gHotSpotVM* exports (prefix dropped) at their addresses, and
  // what libjvm's .symtab adds (hotspot_find.h).
  std::vector<std::pair<std::string, uint64_t>> hotspot;
  JvmSymbols jvm;
  struct Load {
    uint64_t vaddr, offset, filesz;
  };
  std::vector<Load> loads;  // PT_LOADs, for the load bias
};

// Reads the dynamic symbols of the ELF at fd (and the values of V8's
// constants). nullopt when it is not an ELF libelf accepts or defines
// neither _PyRuntime nor V8's constants.
// `read_budget`, when given, is what may still be read (the symbol table
// and its strings): a file that needs more is not read (*over_budget set),
// and the budget drops by what was.
std::optional<RuntimeSymbols> runtime_symbols_of(int fd, uint64_t* read_budget = nullptr,
                                                 bool* over_budget = nullptr);

// What runs in a process: at most one of them.
struct RuntimeTargets {
  std::unique_ptr<PythonTarget> python;
  std::unique_ptr<V8Layout> v8;
  std::unique_ptr<HotSpotTarget> java;
  explicit operator bool() const { return python || v8 || java; }
};

class RuntimeFinder {
 public:
  // The module of pid's executable mappings that defines _PyRuntime and
  // Py_Version (3.11+), whatever its path, and the table entry for its
  // version; or the one that exports V8's constants (node, libnode.so).
  // Empty if none; `why` then says what was found ("" when no module
  // looked like either).
  RuntimeTargets find(pid_t pid, std::string* why);

 private:
  // By file identity (dev, inode, size, mtime): one look per file per run.
  std::unordered_map<std::string, std::shared_ptr<const RuntimeSymbols>> files_;
};

}  // namespace jankbpf::runtime
