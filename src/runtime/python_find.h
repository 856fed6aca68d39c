// Finds CPython in a process by its symbols, cheaply enough to run on the
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

#include "runtime/python_frames.h"

namespace jankbpf::runtime {

// What one ELF file exports that matters here (ELF virtual addresses).
struct PythonSymbols {
  uint64_t runtime = 0, version = 0, code_type = 0, unicode_type = 0, bytes_type = 0;
  struct Load {
    uint64_t vaddr, offset, filesz;
  };
  std::vector<Load> loads;  // PT_LOADs, for the load bias
};

// Reads the dynamic symbols of the ELF at fd. nullopt when it is not an
// ELF libelf accepts or defines no _PyRuntime.
std::optional<PythonSymbols> python_symbols_of(int fd);

class PythonFinder {
 public:
  // The module of pid's executable mappings that defines _PyRuntime and
  // Py_Version (3.11+), whatever its path, and the table entry for its
  // version. nullptr if none; `why` then says what was found ("" when no
  // module looked like CPython).
  std::unique_ptr<PythonTarget> find(pid_t pid, std::string* why);

 private:
  // By file identity (dev, inode, size, mtime): one look per file per run.
  std::unordered_map<std::string, std::shared_ptr<const PythonSymbols>> files_;
};

}  // namespace jankbpf::runtime
