// The GNU build-id of an ELF file: what names a binary version exactly
// (the records' bundle_version, module tables, debug-file lookup).
#pragma once

#include <libelf.h>

#include <string>

namespace jankbpf {

// Hex GNU build-id of an ELF libelf has open (from its PT_NOTE segments or,
// failing those, its note sections), or "" when it has none.
std::string gnu_build_id(Elf* elf);

// Hex build-id of the ELF open at `fd`, or "" when it has none or the file
// is not a well-formed ELF. Reads the file as untrusted input.
std::string read_build_id(int fd);

}  // namespace jankbpf
