#include "runtime/runtime_find.h"

#include <gelf.h>
#include <sys/sysmacros.h>
#include <libelf.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_set>

#include <unistd.h>

#include "stack/maps.h"
#include "util/safe_open.h"

namespace jankbpf::runtime {
namespace {

// Bounds for a hostile file: the symbol table and strings read, and the
// files looked at for one process and what is read of them in all (on the
// ring thread: 256 files of 32 MiB would stall it for seconds).
constexpr uint64_t kMaxDynBytes = 16u << 20;
constexpr uint64_t kMaxReadPerProcess = 64u << 20;
constexpr size_t kMaxFilesPerProcess = 256;
constexpr size_t kMaxFileCache = 4096;
constexpr size_t kMaxV8Constants = 4096;

// The load bias of a mapping at `start` of file offset `pgoff`: the PT_LOAD
// covering pgoff maps it at p_vaddr - p_offset + pgoff (as ElfImage::load_bias).
std::optional<uint64_t> bias_of(const RuntimeSymbols& s, uint64_t start, uint64_t pgoff) {
  for (const auto& l : s.loads) {
    uint64_t page_lo = l.offset & ~uint64_t{0xffff};
    if (pgoff >= page_lo && pgoff < l.offset + std::max<uint64_t>(l.filesz, 1))
      return start - pgoff - (l.vaddr - l.offset);
  }
  return std::nullopt;
}

}  // namespace

std::optional<RuntimeSymbols> runtime_symbols_of(int fd, uint64_t* read_budget, bool* over_budget) {
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });
  // ELF_C_READ: headers and section data come by pread when asked for.
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  if (!elf) return std::nullopt;
  struct Closer {
    Elf* e;
    ~Closer() { elf_end(e); }
  } closer{elf};
  if (elf_kind(elf) != ELF_K_ELF || gelf_getclass(elf) != ELFCLASS64) return std::nullopt;
  size_t shnum = 0;
  if (elf_getshdrnum(elf, &shnum) != 0) return std::nullopt;
  RuntimeSymbols out;
  bool found = false;
  struct V8Sym {
    std::string name;
    uint64_t value, size;
    size_t shndx;
  };
  std::vector<V8Sym> v8syms;
  Elf_Scn* scn = nullptr;
  size_t guard = 0;
  while ((scn = elf_nextscn(elf, scn)) != nullptr && ++guard < 65536) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || sh.sh_entsize == 0 || sh.sh_link >= shnum)
      continue;
    GElf_Shdr strsh;
    Elf_Scn* strscn = elf_getscn(elf, sh.sh_link);
    if (!strscn || !gelf_getshdr(strscn, &strsh) || sh.sh_size > kMaxDynBytes || strsh.sh_size > kMaxDynBytes)
      return std::nullopt;
    if (read_budget) {
      if (sh.sh_size + strsh.sh_size > *read_budget) {
        if (over_budget) *over_budget = true;
        return std::nullopt;
      }
      *read_budget -= sh.sh_size + strsh.sh_size;
    }
    Elf_Data* d = elf_getdata(scn, nullptr);
    if (!d || !d->d_buf) return std::nullopt;
    size_t count = d->d_size / sizeof(Elf64_Sym);
    for (size_t i = 1; i < count; ++i) {
      GElf_Sym s;
      if (!gelf_getsym(d, static_cast<int>(i), &s)) break;
      if (s.st_shndx == SHN_UNDEF || s.st_value == 0) continue;
      const char* n = elf_strptr(elf, sh.sh_link, s.st_name);
      if (!n || (n[0] != '_' && n[0] != 'P' && n[0] != 'v' && n[0] != 'g')) continue;  // every name wanted starts so
      std::string_view name(n);
      if (is_hotspot_export(name)) {
        if (out.hotspot.size() < 64) out.hotspot.emplace_back(std::string(name.substr(10)), s.st_value);
        continue;
      }
      if (is_v8dbg_name(name)) {
        if (v8syms.size() < kMaxV8Constants) v8syms.push_back({std::string(name.substr(6)), s.st_value, s.st_size, s.st_shndx});
        continue;
      }
      if (name == "_PyRuntime") out.runtime = s.st_value, found = true;
      else if (name == "Py_Version") out.version = s.st_value;
      else if (name == "PyCode_Type") out.code_type = s.st_value;
      else if (name == "PyUnicode_Type") out.unicode_type = s.st_value;
      else if (name == "PyBytes_Type") out.bytes_type = s.st_value;
    }
    break;  // one .dynsym
  }
  // Each constant's value: an int in .data (or .bss, zero) at its address.
  for (const V8Sym& v : v8syms) {
    GElf_Shdr sh;
    Elf_Scn* sec = v.shndx < shnum ? elf_getscn(elf, v.shndx) : nullptr;
    if (!sec || !gelf_getshdr(sec, &sh) || v.value < sh.sh_addr || v.value - sh.sh_addr >= sh.sh_size) continue;
    int64_t value = 0;
    size_t len = v.size == 8 ? 8 : 4;
    if (sh.sh_type != SHT_NOBITS) {
      uint8_t buf[8] = {};
      if (pread(fd, buf, len, static_cast<off_t>(sh.sh_offset + (v.value - sh.sh_addr))) != static_cast<ssize_t>(len))
        continue;
      if (len == 8) std::memcpy(&value, buf, 8);
      else {
        int32_t v32;
        std::memcpy(&v32, buf, 4);
        value = v32;
      }
    }
    out.v8dbg.emplace_back(v.name, value);
  }
  if (!out.hotspot.empty()) jvm_symtab(elf, out.jvm);
  if (!found && out.v8dbg.empty() && out.hotspot.empty()) return std::nullopt;
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) return std::nullopt;
  for (size_t i = 0; i < phnum && i < 4096; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD)
      out.loads.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz});
  }
  return out;
}

RuntimeTargets RuntimeFinder::find(pid_t pid, std::string* why) {
  if (why) why->clear();
  RuntimeTargets found;
  std::string text;
  const std::string proc = "/proc/" + std::to_string(pid);
  if (!stack::read_small_file(proc + "/maps", text)) return found;
  stack::ProcMaps maps = stack::ProcMaps::parse(text);
  std::unordered_set<std::string> seen;
  size_t files = 0;
  uint64_t read_budget = kMaxReadPerProcess;
  for (const auto& m : maps.entries()) {
    if (!m.x || !m.file_backed()) continue;
    char id[96];
    std::snprintf(id, sizeof id, "%" PRIu64 ":%" PRIu64 ":%" PRIu64, m.dev_major, m.dev_minor, m.inode);
    if (!seen.insert(id).second) continue;
    if (++files > kMaxFilesPerProcess) break;
    // The very file mapped (deleted, replaced, another mount namespace),
    // whose identity keys the cache.
    char range[64];
    std::snprintf(range, sizeof range, "/map_files/%" PRIx64 "-%" PRIx64, m.start, m.end);
    OpenPolicy policy;
    policy.max_size = uint64_t{1} << 30;
    Opened o = open_magic(proc + range, policy);
    if (!o && !m.deleted) {  // map_files needs CAP_SYS_ADMIN: the path in its root, same inode only
      o = open_in_root(proc + "/root", m.path, policy);
      if (o && (o.st.st_ino != m.inode || major(o.st.st_dev) != m.dev_major || minor(o.st.st_dev) != m.dev_minor))
        continue;
    }
    if (!o) continue;
    std::snprintf(id, sizeof id, "%" PRIu64 ":%" PRIu64 ":%" PRId64 ":%" PRId64 ":%" PRId64,
                  static_cast<uint64_t>(o.st.st_dev), static_cast<uint64_t>(o.st.st_ino),
                  static_cast<int64_t>(o.st.st_size), static_cast<int64_t>(o.st.st_mtim.tv_sec),
                  static_cast<int64_t>(o.st.st_mtim.tv_nsec));
    auto it = files_.find(id);
    if (it == files_.end()) {
      if (files_.size() >= kMaxFileCache) files_.clear();
      bool over = false;
      auto syms = runtime_symbols_of(o.fd.get(), &read_budget, &over);
      if (over) continue;  // not looked at (this process's reads are spent): not remembered either
      it = files_.emplace(id, syms ? std::make_shared<const RuntimeSymbols>(std::move(*syms)) : nullptr).first;
    }
    if (!it->second) continue;
    const RuntimeSymbols& s = *it->second;
    std::string path = m.path;
    if (!s.hotspot.empty()) {  // HotSpot: its tables, read from the process
      auto bias = bias_of(s, m.start, m.pgoff);
      if (!bias) continue;
      HotSpotExports ex;
      for (const auto& [name, addr] : s.hotspot) ex[name] = addr + *bias;
      JvmSymbols syms = s.jvm;
      auto move = [&](uint64_t& a) { a = a ? a + *bias : 0; };
      move(syms.safepoint_state);
      move(syms.cur_vm_operation);
      for (auto& v : syms.vm_op_vtables) move(v.first);
      ProcessMemory mem(pid);
      std::string jwhy;
      found.java = hotspot_target(mem, ex, std::move(syms), &jwhy);
      if (why)
        *why = path + (found.java ? ": HotSpot" + (found.java->release.empty() ? "" : " " + found.java->release)
                                  : ": HotSpot, " + jwhy);
      return found;
    }
    if (!s.runtime) {  // V8: constants only, no address in the process needed
      std::string v8why;
      auto layout = v8_layout_from(s.v8dbg, &v8why);
      if (why) *why = path + (layout ? ": V8" : ": V8, " + v8why);
      if (layout) found.v8 = std::make_unique<V8Layout>(*layout);
      return found;
    }
    auto bias = bias_of(s, m.start, m.pgoff);
    if (!bias) continue;
    if (!s.version) {
      if (why) *why = path + " has _PyRuntime but no Py_Version: CPython older than 3.11";
      return found;
    }
    auto t = std::make_unique<PythonTarget>();
    t->runtime = s.runtime + *bias;
    t->code_type = s.code_type ? s.code_type + *bias : 0;
    t->unicode_type = s.unicode_type ? s.unicode_type + *bias : 0;
    t->bytes_type = s.bytes_type ? s.bytes_type + *bias : 0;
    // Py_Version is `const unsigned long` (PY_VERSION_HEX).
    ProcessMemory mem(pid);
    if (!mem.read_value(s.version + *bias, &t->version_hex)) {
      if (why) *why = path + ": Py_Version unreadable";
      return found;
    }
    t->layout = python_layout(t->version_hex);
    if (!t->layout) {
      if (why)
        *why = path + ": CPython " + python_version_text(t->version_hex) + " (frames are read for " +
               python_supported_versions() + ")";
      return found;
    }
    if (why) *why = path + ": CPython " + python_version_text(t->version_hex);
    found.python = std::move(t);
    return found;
  }
  return found;
}

}  // namespace jankbpf::runtime
