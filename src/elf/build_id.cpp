#include "elf/build_id.h"

#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace jankbpf {
namespace {

std::string hex(const unsigned char* b, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; i++) {
    out += digits[b[i] >> 4];
    out += digits[b[i] & 15];
  }
  return out;
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }

// The notes in [off, off + len) of the file: headers one by one, only the
// build-id's descriptor read. A note may claim any size; nothing past the
// walked span (at most kMaxNoteSpan) is ever read.
std::string scan_notes(const ReadAt& read, uint64_t off, uint64_t len, uint64_t align) {
  const uint64_t a = align == 8 ? 8 : 4;  // as libelf: 8-aligned notes only in 8-aligned segments
  const uint64_t end = off + std::min<uint64_t>(len, kMaxNoteSpan);
  for (size_t n = 0; n < kMaxNotesScanned && end - off >= sizeof(Elf64_Nhdr) && off < end; ++n) {
    Elf64_Nhdr nh;
    if (!read(off, &nh, sizeof nh)) return "";
    const uint64_t name_off = off + sizeof nh;
    const uint64_t desc_off = name_off + align_up(nh.n_namesz, a);
    const uint64_t next = desc_off + align_up(nh.n_descsz, a);
    if (next > end) return "";  // claims past the span: not looked into
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && nh.n_descsz > 0 && nh.n_descsz <= 64) {
      char name[4];
      unsigned char desc[64];
      if (read(name_off, name, 4) && std::memcmp(name, "GNU", 4) == 0 && read(desc_off, desc, nh.n_descsz))
        return hex(desc, nh.n_descsz);
    }
    off = next;
  }
  return "";
}

}  // namespace

std::string build_id_at(const ReadAt& read, uint64_t file_size) {
  Elf64_Ehdr eh;
  if (file_size < sizeof eh || !read(0, &eh, sizeof eh)) return "";
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return "";
  auto inside = [&](uint64_t off, uint64_t len) { return off <= file_size && len <= file_size - off; };
  // PT_NOTE segments first (what the loader and libdw read), then note
  // sections for files without program headers.
  if (eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum > 0 && eh.e_phnum < PN_XNUM) {
    std::vector<Elf64_Phdr> ph(std::min<size_t>(eh.e_phnum, kMaxHeadersScanned));
    if (inside(eh.e_phoff, ph.size() * sizeof(Elf64_Phdr)) &&
        read(eh.e_phoff, ph.data(), ph.size() * sizeof(Elf64_Phdr)))
      for (const auto& p : ph)
        if (p.p_type == PT_NOTE && inside(p.p_offset, 0)) {
          std::string id = scan_notes(read, p.p_offset, std::min(p.p_filesz, file_size - p.p_offset), p.p_align);
          if (!id.empty()) return id;
        }
  }
  if (eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shnum > 0) {
    std::vector<Elf64_Shdr> sh(std::min<size_t>(eh.e_shnum, kMaxHeadersScanned));
    if (inside(eh.e_shoff, sh.size() * sizeof(Elf64_Shdr)) &&
        read(eh.e_shoff, sh.data(), sh.size() * sizeof(Elf64_Shdr)))
      for (const auto& s : sh)
        if (s.sh_type == SHT_NOTE && inside(s.sh_offset, 0)) {
          std::string id =
              scan_notes(read, s.sh_offset, std::min(s.sh_size, file_size - s.sh_offset), s.sh_addralign);
          if (!id.empty()) return id;
        }
  }
  return "";
}

std::string read_build_id(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) return "";
  // pread, never a mapping: a file its owner truncates meanwhile must not
  // SIGBUS us; a short read is a refusal.
  ReadAt read = [fd](uint64_t off, void* buf, size_t len) {
    size_t got = 0;
    while (got < len) {
      ssize_t n = ::pread(fd, static_cast<char*>(buf) + got, len - got, static_cast<off_t>(off + got));
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    return true;
  };
  return build_id_at(read, static_cast<uint64_t>(st.st_size));
}

}  // namespace jankbpf
