// The GNU build-id of an ELF file: what names a binary version exactly
// (bundle_version, module tables, debug-file lookup).
#pragma once

#include <string>

namespace jankbpf {

// Hex build-id of the ELF open at `fd`, or "" when it has none or the file
// is not a well-formed ELF. Reads the file as untrusted input.
std::string read_build_id(int fd);

}  // namespace jankbpf
