// What attaching a marker needs from binaries: where a binary named by the
// user is, the file offset of a function (a uprobe's offset), and the USDT
// probes (.note.stapsdt) a binary carries. Files are read as untrusted ELF.
#pragma once

#include <libelf.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace jankbpf {

namespace stack {
class ElfImage;
}  // namespace stack

// The real path of BINARY: a path (with a '/') as given; a bare name is
// looked up in PATH, then in LD_LIBRARY_PATH and the standard library
// directories (so "libglib-2.0.so.0" finds the system's GLib). Symlinks are
// resolved: a uprobe belongs to the file, not to a name of it (except under
// /proc/PID/root, another mount namespace's view, taken as it is).
std::optional<std::string> resolve_binary(const std::string& name, std::string* error);

struct FunctionSite {
  uint64_t vaddr = 0;   // st_value
  uint64_t offset = 0;  // file offset: what a uprobe attaches at
};

// The entry of function SYMBOL (.symtab or .dynsym) in the ELF at `path`.
// Several local functions of that name at different addresses make it
// ambiguous: nullopt with *error saying so.
std::optional<FunctionSite> find_function(const std::string& path, const std::string& symbol,
                                          std::string* error);
// The same in an image parsed already (`path` names it in messages).
std::optional<FunctionSite> find_function(const stack::ElfImage& image, const std::string& path,
                                          const std::string& symbol, std::string* error);

struct SdtProbe {
  std::string provider, name, args;  // args: the note's argument spec, e.g. "8@%rax -4@%edx"
  uint64_t pc = 0, semaphore = 0;    // ELF addresses (semaphore 0: none)
};

// The USDT probes in .note.stapsdt (empty when the file has none or is no ELF).
std::vector<SdtProbe> sdt_probes(const std::string& path);
// The same from an ELF libelf has open (the fuzzer's in-memory images).
std::vector<SdtProbe> sdt_probes(Elf* elf);
bool has_sdt_probe(const std::vector<SdtProbe>& probes, const std::string& provider,
                   const std::string& name);

// "node::Environment::RunTimers(uv_timer_s*)" -> "node::Environment::RunTimers";
// a C name is returned as it is.
std::string display_symbol(const std::string& symbol);

}  // namespace jankbpf
