#include "frame/wayland_lib.h"

#include <elf.h>
#include <gelf.h>
#include <libelf.h>

#include <cstring>
#include <vector>

#include "markers/probe_elf.h"
#include "stack/elf_image.h"

namespace jankbpf::frame {
namespace {

uint32_t le32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

// x86_64: `ff 25 disp32` (jmp *disp(%rip)), maybe `f2`-prefixed (bnd jmp).
std::optional<uint64_t> x86_jump(const uint8_t* code, size_t size, uint64_t addr, uint64_t got) {
  for (size_t i = 0; i + 6 <= size; i++) {
    size_t at = i;
    if (code[at] == 0xf2 && at + 7 <= size) at++;
    if (code[at] != 0xff || code[at + 1] != 0x25) continue;
    const int32_t disp = static_cast<int32_t>(le32(code + at + 2));
    const uint64_t next = addr + at + 6;
    if (next + static_cast<int64_t>(disp) == got) return addr + i;
  }
  return std::nullopt;
}

// aarch64: `adrp x16, page; ldr x17, [x16, #off]` loading the GOT slot.
std::optional<uint64_t> arm64_jump(const uint8_t* code, size_t size, uint64_t addr, uint64_t got) {
  for (size_t i = 0; i + 8 <= size; i += 4) {
    const uint32_t adrp = le32(code + i), ldr = le32(code + i + 4);
    if ((adrp & 0x9f00001f) != 0x90000010) continue;         // adrp x16
    if ((ldr & 0xffc003ff) != 0xf9400211) continue;          // ldr x17, [x16, #imm12*8]
    const uint64_t immlo = (adrp >> 29) & 3, immhi = (adrp >> 5) & 0x7ffff;
    int64_t imm = static_cast<int64_t>((immhi << 2) | immlo) << 12;
    if (imm & (int64_t{1} << 32)) imm -= int64_t{1} << 33;   // sign of the 33-bit offset
    const uint64_t page = ((addr + i) & ~uint64_t{0xfff}) + imm;
    const uint64_t off = ((ldr >> 10) & 0xfff) * 8;
    if (page + off == got) return addr + i;
  }
  return std::nullopt;
}

struct Section {
  GElf_Shdr hdr{};
  std::string name;
  Elf_Scn* scn = nullptr;
};

std::vector<Section> sections(Elf* elf) {
  std::vector<Section> out;
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return out;
  Elf_Scn* scn = nullptr;
  for (size_t guard = 0; (scn = elf_nextscn(elf, scn)) && guard < 4096; guard++) {
    Section s;
    if (!gelf_getshdr(scn, &s.hdr)) continue;
    const char* n = elf_strptr(elf, shstrndx, s.hdr.sh_name);
    s.name = n ? n : "";
    s.scn = scn;
    out.push_back(std::move(s));
  }
  return out;
}

// The GOT slot of the PLT relocation for `symbol` (R_*_JUMP_SLOT), 0 if none.
uint64_t jump_slot(Elf* elf, const std::vector<Section>& secs, const char* symbol) {
  for (const auto& s : secs) {
    if (s.hdr.sh_type != SHT_RELA || s.name != ".rela.plt") continue;
    if (s.hdr.sh_link >= secs.size() + 1) continue;
    Elf_Scn* symscn = elf_getscn(elf, s.hdr.sh_link);
    GElf_Shdr symhdr;
    if (!symscn || !gelf_getshdr(symscn, &symhdr)) continue;
    Elf_Data* rel = elf_getdata(s.scn, nullptr);
    Elf_Data* syms = elf_getdata(symscn, nullptr);
    if (!rel || !syms || !s.hdr.sh_entsize) continue;
    const size_t n = s.hdr.sh_size / s.hdr.sh_entsize;
    for (size_t i = 0; i < n && i < 1'000'000; i++) {
      GElf_Rela r;
      GElf_Sym sym;
      if (!gelf_getrela(rel, static_cast<int>(i), &r)) break;
      if (!gelf_getsym(syms, static_cast<int>(GELF_R_SYM(r.r_info)), &sym)) continue;
      const char* name = elf_strptr(elf, symhdr.sh_link, sym.st_name);
      if (name && strcmp(name, symbol) == 0) return r.r_offset;
    }
  }
  return 0;
}

// ELF address -> file offset, through the PT_LOAD that holds it.
std::optional<uint64_t> file_offset(Elf* elf, uint64_t vaddr) {
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) return std::nullopt;
  for (size_t i = 0; i < phnum; i++) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
    if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) return vaddr - ph.p_vaddr + ph.p_offset;
  }
  return std::nullopt;
}

// x86_64: the one `call rel32` (e8) to the PLT entry at `entry` in the
// library's code, if there is exactly one and no `jmp rel32` (e9) to it. A
// uprobe there is emulated (one trap); on the PLT's `jmp *GOT(%rip)` the
// kernel must single-step it out of line (a second trap per event).
std::optional<uint64_t> x86_sole_call(Elf* elf, const std::vector<Section>& secs, const stack::ElfImage& img,
                                      uint64_t entry) {
  std::optional<uint64_t> call;
  int calls = 0;
  for (const auto& s : secs) {
    if (s.hdr.sh_type != SHT_PROGBITS || !(s.hdr.sh_flags & SHF_EXECINSTR) || s.name.starts_with(".plt")) continue;
    if (s.hdr.sh_size > (64u << 20)) return std::nullopt;
    std::vector<uint8_t> code(s.hdr.sh_size);
    if (!img.read(s.hdr.sh_offset, code.data(), code.size())) return std::nullopt;
    for (size_t i = 0; i + 5 <= code.size(); i++) {
      if (code[i] != 0xe8 && code[i] != 0xe9) continue;
      const int32_t rel = static_cast<int32_t>(le32(&code[i + 1]));
      if (s.hdr.sh_addr + i + 5 + static_cast<int64_t>(rel) != entry) continue;
      if (code[i] == 0xe9) return std::nullopt;  // a tail call: the PLT entry it is
      calls++;
      call = s.hdr.sh_addr + i;
    }
  }
  (void)elf;
  return calls == 1 ? call : std::nullopt;
}

}  // namespace

std::optional<uint64_t> plt_jump_to(const uint8_t* code, size_t size, uint64_t addr, uint64_t got,
                                    uint16_t machine) {
  if (machine == EM_X86_64) return x86_jump(code, size, addr, got);
  if (machine == EM_AARCH64) return arm64_jump(code, size, addr, got);
  return std::nullopt;
}

std::optional<WaylandSites> wayland_sites(const std::string& path, std::string* error) {
  auto img = stack::ElfImage::open_path(path);
  if (!img) {
    *error = "'" + path + "' is not a readable 64-bit ELF file";
    return std::nullopt;
  }
  WaylandSites out;
  out.path = path;
  auto request = find_function(*img, path, "wl_proxy_marshal_array_flags", error);
  if (!request) {
    *error += " (libwayland-client 1.20 or newer has it)";
    return std::nullopt;
  }
  auto listener = find_function(*img, path, "wl_proxy_add_listener", error);
  if (!listener) return std::nullopt;
  out.request = request->offset;
  out.listener = listener->offset;

  Elf* elf = img->elf();
  const auto secs = sections(elf);
  const uint64_t got = jump_slot(elf, secs, "ffi_call");
  if (!got) {
    *error = "no PLT relocation for ffi_call in " + path + " (built with -fno-plt, or without libffi): events unseen";
    return std::nullopt;
  }
  // .plt.sec (IBT builds) holds the entries the code calls; else .plt.
  for (const char* want : {".plt.sec", ".plt"}) {
    for (const auto& s : secs) {
      if (s.name != want || s.hdr.sh_type != SHT_PROGBITS || !(s.hdr.sh_flags & SHF_EXECINSTR)) continue;
      if (s.hdr.sh_size > (16u << 20)) continue;
      std::vector<uint8_t> code(s.hdr.sh_size);
      if (!img->read(s.hdr.sh_offset, code.data(), code.size())) continue;
      auto at = plt_jump_to(code.data(), code.size(), s.hdr.sh_addr, got, img->machine());
      if (!at) continue;
      if (img->machine() == EM_X86_64) {
        const uint64_t entry = *at - (*at - s.hdr.sh_addr) % 16;  // entries are 16 bytes
        if (auto call = x86_sole_call(elf, secs, *img, entry)) at = call;
      }
      auto off = file_offset(elf, *at);
      if (!off) continue;
      out.event = *off;
      return out;
    }
  }
  *error = "no PLT entry for ffi_call found in " + path + ": events unseen";
  return std::nullopt;
}

std::optional<WaylandSites> find_wayland_client(std::string* error) {
  auto path = resolve_binary("libwayland-client.so.0", error);
  if (!path) return std::nullopt;
  return wayland_sites(*path, error);
}

}  // namespace jankbpf::frame
