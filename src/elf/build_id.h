// The GNU build-id of an ELF file: what names a binary version exactly
// (the records' bundle_version, module tables, debug-file lookup).
//
// Read as hostile input, by headers only: a note may claim the rest of a
// sparse 4 GiB file (issue 26: libdw read such a note whole, +3 GiB for one
// executable), so the notes are walked header by header within a bounded
// span, and only the build-id's descriptor (at most 64 bytes) is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace jankbpf {

// Bytes of one PT_NOTE segment or note section walked at most, notes
// looked at in each, and program or section headers read at most.
inline constexpr uint64_t kMaxNoteSpan = 64 * 1024;
inline constexpr size_t kMaxNotesScanned = 64;
inline constexpr size_t kMaxHeadersScanned = 4096;

// Reads `len` bytes at file offset `off`; false if it cannot (past the end).
using ReadAt = std::function<bool(uint64_t off, void* buf, size_t len)>;

// Hex GNU build-id of the 64-bit little-endian ELF that `read` serves
// (`file_size` bytes), from its PT_NOTE segments or, failing those, its
// note sections; "" when it has none or is not such an ELF.
std::string build_id_at(const ReadAt& read, uint64_t file_size);

// The same for the regular file open at `fd`, read with pread (never
// mapped: a file truncated meanwhile must not SIGBUS us).
std::string read_build_id(int fd);

}  // namespace jankbpf
