#include "elf/build_id.h"

#include <elfutils/libdwelf.h>
#include <gelf.h>
#include <libelf.h>

#include <mutex>

namespace jankbpf {

std::string read_build_id(int fd) {
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });

  // ELF_C_READ_MMAP: libelf bounds-checks every access against the file size.
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  if (!elf) return "";
  std::string hex;
  if (elf_kind(elf) == ELF_K_ELF) {
    const void* id = nullptr;
    ssize_t len = dwelf_elf_gnu_build_id(elf, &id);
    if (len > 0 && len <= 64) {
      static const char digits[] = "0123456789abcdef";
      const auto* b = static_cast<const unsigned char*>(id);
      for (ssize_t i = 0; i < len; i++) {
        hex += digits[b[i] >> 4];
        hex += digits[b[i] & 15];
      }
    }
  }
  elf_end(elf);
  return hex;
}

}  // namespace jankbpf
