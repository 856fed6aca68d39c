#include "markers/probe_elf.h"

#include <cxxabi.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include "stack/elf_image.h"

namespace jankbpf {
namespace {

#if defined(__aarch64__)
constexpr const char* kMultiarch = "aarch64-linux-gnu";
#else
constexpr const char* kMultiarch = "x86_64-linux-gnu";
#endif

bool is_regular(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::optional<std::string> real(const std::string& path) {
  char buf[PATH_MAX];
  if (!realpath(path.c_str(), buf)) return std::nullopt;
  return std::string(buf);
}

std::vector<std::string> split_path_list(const char* list) {
  std::vector<std::string> out;
  if (!list) return out;
  std::string s(list);
  size_t start = 0;
  while (start <= s.size()) {
    size_t colon = s.find(':', start);
    if (colon == std::string::npos) colon = s.size();
    if (colon > start) out.push_back(s.substr(start, colon - start));
    start = colon + 1;
  }
  return out;
}

}  // namespace

std::optional<std::string> resolve_binary(const std::string& name, std::string* error) {
  if (name.find('/') != std::string::npos) {
    if (!is_regular(name)) {
      *error = "'" + name + "': no such file";
      return std::nullopt;
    }
    // /proc/PID/root/...: another mount namespace's file; realpath would
    // follow the magic link to our own root.
    if (name.starts_with("/proc/")) return name;
    return real(name);
  }
  std::vector<std::string> dirs = split_path_list(getenv("PATH"));
  if (dirs.empty()) dirs = {"/usr/local/bin", "/usr/bin", "/bin"};
  for (const auto& d : split_path_list(getenv("LD_LIBRARY_PATH"))) dirs.push_back(d);
  for (std::string base : {"/lib/", "/usr/lib/", "/usr/local/lib/"}) dirs.push_back(base + kMultiarch);
  for (const char* d : {"/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib"}) dirs.push_back(d);
  for (const auto& d : dirs) {
    std::string candidate = d + "/" + name;
    if (is_regular(candidate)) return real(candidate);
  }
  *error = "'" + name + "' not found in PATH or the library directories";
  return std::nullopt;
}

std::optional<FunctionSite> find_function(const std::string& path, const std::string& symbol,
                                          std::string* error) {
  auto img = stack::ElfImage::open_path(path);
  if (!img) {
    *error = "'" + path + "' is not a readable 64-bit ELF file";
    return std::nullopt;
  }
  return find_function(*img, path, symbol, error);
}

std::optional<FunctionSite> find_function(const stack::ElfImage& image, const std::string& path,
                                          const std::string& symbol, std::string* error) {
  const stack::ElfImage* img = &image;
  std::vector<stack::ElfSymbol> syms;
  img->collect_symbols(syms);
  std::set<uint64_t> addrs;
  for (const auto& s : syms)
    if (s.name == symbol) addrs.insert(s.addr);
  if (addrs.empty()) {
    *error = "no function '" + symbol + "' in " + path +
             (img->has_symtab() ? "" : " (it has no .symtab: stripped, only exported functions are known)");
    return std::nullopt;
  }
  if (addrs.size() > 1) {
    *error = "'" + symbol + "' in " + path + " is ambiguous: " + std::to_string(addrs.size()) +
             " functions of that name";
    return std::nullopt;
  }
  FunctionSite site;
  site.vaddr = *addrs.begin();
  size_t phnum = 0;
  if (elf_getphdrnum(img->elf(), &phnum) == 0) {
    for (size_t i = 0; i < phnum; i++) {
      GElf_Phdr ph;
      if (!gelf_getphdr(img->elf(), static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
      if (site.vaddr >= ph.p_vaddr && site.vaddr < ph.p_vaddr + ph.p_filesz) {
        site.offset = site.vaddr - ph.p_vaddr + ph.p_offset;
        return site;
      }
    }
  }
  *error = "'" + symbol + "' in " + path + " is not inside a loaded segment";
  return std::nullopt;
}

std::vector<SdtProbe> sdt_probes(const std::string& path) {
  auto img = stack::ElfImage::open_path(path);
  return img ? sdt_probes(img->elf()) : std::vector<SdtProbe>{};
}

std::vector<SdtProbe> sdt_probes(Elf* elf) {
  std::vector<SdtProbe> out;
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return out;
  Elf_Scn* scn = nullptr;
  size_t guard = 0;
  while ((scn = elf_nextscn(elf, scn)) != nullptr && ++guard < 65536) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE) continue;
    const char* sname = elf_strptr(elf, shstrndx, sh.sh_name);
    if (!sname || strcmp(sname, ".note.stapsdt") != 0) continue;
    Elf_Data* d = elf_getdata(scn, nullptr);
    if (!d || !d->d_buf) continue;
    size_t off = 0, name_off = 0, desc_off = 0;
    GElf_Nhdr nh;
    while (off < d->d_size && out.size() < 100000) {
      size_t next = gelf_getnote(d, off, &nh, &name_off, &desc_off);
      if (next == 0) break;
      off = next;
      if (nh.n_type != 3 || nh.n_namesz != 8 ||
          memcmp(static_cast<const char*>(d->d_buf) + name_off, "stapsdt", 8) != 0)
        continue;
      // pc, base, semaphore (ELF64 addresses), then provider\0name\0args\0.
      if (nh.n_descsz < 3 * 8 + 3) continue;
      const char* desc = static_cast<const char*>(d->d_buf) + desc_off;
      SdtProbe p;
      memcpy(&p.pc, desc, 8);
      memcpy(&p.semaphore, desc + 16, 8);
      const char* s = desc + 24;
      const char* end = desc + nh.n_descsz;
      std::string* fields[] = {&p.provider, &p.name, &p.args};
      bool ok = true;
      for (auto* f : fields) {
        const char* z = static_cast<const char*>(memchr(s, 0, end - s));
        if (!z) {
          ok = false;
          break;
        }
        f->assign(s, z);
        s = z + 1;
      }
      if (ok) out.push_back(std::move(p));
    }
  }
  return out;
}

bool has_sdt_probe(const std::vector<SdtProbe>& probes, const std::string& provider,
                   const std::string& name) {
  for (const auto& p : probes)
    if (p.provider == provider && p.name == name) return true;
  return false;
}

std::string display_symbol(const std::string& symbol) {
  if (!symbol.starts_with("_Z")) return symbol;
  int status = 0;
  char* d = abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status);
  if (!d || status != 0) {
    free(d);
    return symbol;
  }
  std::string s(d);
  free(d);
  // Drop the parameter list: the function's name is what names a runnable.
  int depth = 0;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')') depth++;
    else if (s[i] == '(' && --depth == 0) {
      s.resize(i);
      break;
    }
  }
  return s;
}

}  // namespace jankbpf
