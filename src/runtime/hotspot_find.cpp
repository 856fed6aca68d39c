#include "runtime/hotspot_find.h"

#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cctype>
#include <string_view>

namespace jankbpf::runtime {
namespace {

constexpr uint64_t kMaxSymtabBytes = 16u << 20;  // libjvm 17-25: 1.7 MB of symbols, 3.3 MB of names
constexpr size_t kMaxVmOps = 1024;

}  // namespace

void jvm_symtab(Elf* elf, JvmSymbols& out) {
  size_t shnum = 0;
  if (elf_getshdrnum(elf, &shnum) != 0) return;
  Elf_Scn* scn = nullptr;
  for (size_t guard = 0; (scn = elf_nextscn(elf, scn)) != nullptr && guard < 65536; ++guard) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || sh.sh_entsize == 0 || sh.sh_link >= shnum ||
        sh.sh_size > kMaxSymtabBytes)
      continue;
    GElf_Shdr strsh;
    Elf_Scn* strscn = elf_getscn(elf, sh.sh_link);
    if (!strscn || !gelf_getshdr(strscn, &strsh) || strsh.sh_size > kMaxSymtabBytes) return;
    Elf_Data* d = elf_getdata(scn, nullptr);
    if (!d || !d->d_buf) return;
    size_t count = d->d_size / sizeof(Elf64_Sym);
    for (size_t i = 1; i < count; ++i) {
      GElf_Sym s;
      if (!gelf_getsym(d, static_cast<int>(i), &s)) break;
      if (GELF_ST_TYPE(s.st_info) != STT_OBJECT || s.st_shndx == SHN_UNDEF || s.st_value == 0) continue;
      const char* n = elf_strptr(elf, sh.sh_link, s.st_name);
      if (!n || n[0] != '_' || n[1] != 'Z') continue;
      std::string_view name(n);
      if (name == "_ZN20SafepointSynchronize6_stateE") {
        out.safepoint_state = s.st_value;
      } else if (name == "_ZN8VMThread17_cur_vm_operationE") {
        out.cur_vm_operation = s.st_value;
      } else if (name.starts_with("_ZTV") && out.vm_op_vtables.size() < kMaxVmOps) {
        // "_ZTV25VM_G1CollectForAllocation": a VM operation's vtable.
        size_t k = 4;
        while (k < name.size() && std::isdigit(static_cast<unsigned char>(name[k]))) ++k;
        std::string_view cls = name.substr(k);
        if (k > 4 && cls.starts_with("VM_") && cls.size() > 3 && cls.size() < 96)
          out.vm_op_vtables.emplace_back(s.st_value, std::string(cls.substr(3)));
      }
    }
    break;  // one .symtab
  }
  std::sort(out.vm_op_vtables.begin(), out.vm_op_vtables.end());
}

std::unique_ptr<HotSpotTarget> hotspot_target(MemReader& mem, const HotSpotExports& exports, JvmSymbols syms,
                                              std::string* why) {
  auto tables = read_vm_tables(mem, exports, why);
  if (!tables) return nullptr;
#if defined(__aarch64__)
  const bool arm64 = true;
#else
  const bool arm64 = false;
#endif
  auto layout = hotspot_layout_from(*tables, arm64, why);
  if (!layout) return nullptr;
  auto t = std::make_unique<HotSpotTarget>();
  t->layout = *layout;
  t->syms = std::move(syms);
  t->arm64 = arm64;
  // The release string, for the log line: a char* static.
  auto it = tables->fields.find("Abstract_VM_Version::_s_vm_release");
  uint64_t p = 0;
  char buf[64] = {};
  if (it != tables->fields.end() && it->second.is_static && mem.read_value(it->second.address, &p) && p &&
      mem.read(p, buf, sizeof buf - 1)) {
    for (char* c = buf; *c; ++c)
      if (!std::isprint(static_cast<unsigned char>(*c))) *c = '?';
    t->release = buf;
  }
  return t;
}

}  // namespace jankbpf::runtime
