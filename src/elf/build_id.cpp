#include "elf/build_id.h"

#include <elfutils/libdwelf.h>
#include <gelf.h>
#include <libelf.h>

#include <mutex>

namespace jankbpf {

std::string gnu_build_id(Elf* elf) {
  const void* id = nullptr;
  // libdw's reader bounds-checks every note against the file.
  ssize_t len = dwelf_elf_gnu_build_id(elf, &id);
  if (len <= 0 || len > 64) return "";
  static const char digits[] = "0123456789abcdef";
  const auto* b = static_cast<const unsigned char*>(id);
  std::string hex;
  for (ssize_t i = 0; i < len; i++) {
    hex += digits[b[i] >> 4];
    hex += digits[b[i] & 15];
  }
  return hex;
}

std::string read_build_id(int fd) {
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });

  // ELF_C_READ (pread into memory), not a mapping: a file its owner
  // truncates meanwhile must not SIGBUS us. libelf bounds-checks the rest.
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  if (!elf) return "";
  std::string hex = elf_kind(elf) == ELF_K_ELF ? gnu_build_id(elf) : "";
  elf_end(elf);
  return hex;
}

}  // namespace jankbpf
