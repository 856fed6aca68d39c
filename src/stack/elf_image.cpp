#include "stack/elf_image.h"

#include "elf/build_id.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include <zlib.h>

namespace jankbpf::stack {
namespace {

void ensure_libelf() {
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });
}

// A zero-size symbol is trusted to cover at most this many bytes.
constexpr uint64_t kMaxSizelessSpan = 64 * 1024;

bool symbol_wanted(const GElf_Sym& s, Elf* elf, size_t shnum) {
  int type = GELF_ST_TYPE(s.st_info);
  if (s.st_shndx == SHN_UNDEF || s.st_value == 0) return false;
  if (type == STT_FUNC || type == STT_GNU_IFUNC) return true;
  if (type != STT_NOTYPE || s.st_shndx >= shnum || s.st_shndx >= SHN_LORESERVE) return false;
  // Untyped labels in executable sections (hand-written assembly).
  Elf_Scn* scn = elf_getscn(elf, s.st_shndx);
  GElf_Shdr sh;
  return scn && gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_EXECINSTR);
}

// A sealed private copy of the first `size` bytes of `src` (fewer if it
// shrank meanwhile): no one can truncate it under our mappings.
Fd private_copy(int src, uint64_t size) {
  Fd mem(::memfd_create("jankbpf-elf", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!mem) return Fd();
  off_t off = 0;
  while (static_cast<uint64_t>(off) < size) {
    ssize_t n = ::sendfile(mem.get(), src, &off, std::min<uint64_t>(size - off, 1u << 30));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Fd();
    if (n == 0) break;  // the file shrank: keep what was there
  }
  if (::ftruncate(mem.get(), off) != 0 ||
      ::fcntl(mem.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
    return Fd();
  return mem;
}

}  // namespace

std::string hex_encode(const uint8_t* p, size_t n) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  s.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    s.push_back(kHex[p[i] >> 4]);
    s.push_back(kHex[p[i] & 15]);
  }
  return s;
}

std::unique_ptr<ElfImage> ElfImage::open_path(const std::string& path) {
  OpenPolicy p;
  p.max_size = kMaxFileBytes;
  p.follow_symlinks = true;
  return open_path(path, p);
}

std::unique_ptr<ElfImage> ElfImage::open_path(const std::string& path, const OpenPolicy& policy) {
  Opened o = open_untrusted(path, policy);
  return o ? open(std::move(o.fd), policy.max_size) : nullptr;
}

std::unique_ptr<ElfImage> ElfImage::open(Fd fd, uint64_t max_bytes) {
  if (!fd) return nullptr;
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 64 ||
      static_cast<uint64_t>(st.st_size) > max_bytes)
    return nullptr;
  Fd copy = private_copy(fd.get(), static_cast<uint64_t>(st.st_size));
  if (!copy) return nullptr;
  struct stat cst;
  if (::fstat(copy.get(), &cst) != 0 || cst.st_size < 64) return nullptr;
  ensure_libelf();
  std::unique_ptr<ElfImage> img(new ElfImage());
  img->fd_ = std::move(copy);
  img->size_ = static_cast<uint64_t>(cst.st_size);
  img->dev_ = st.st_dev;
  img->ino_ = st.st_ino;
  img->mtime_ns_ = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  img->ctime_ns_ = int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
  if (!img->init()) return nullptr;
  return img;
}

ElfImage::~ElfImage() {
  if (elf_) elf_end(elf_);
}

bool ElfImage::init() {
  elf_ = elf_begin(fd_.get(), ELF_C_READ_MMAP, nullptr);
  if (!elf_ || elf_kind(elf_) != ELF_K_ELF) return false;
  size_t raw_size = 0;
  raw_ = elf_rawfile(elf_, &raw_size);
  if (!raw_) return false;
  size_ = std::min<uint64_t>(size_, raw_size);
  if (gelf_getclass(elf_) != ELFCLASS64) return false;
  GElf_Ehdr eh;
  if (!gelf_getehdr(elf_, &eh)) return false;
  machine_ = eh.e_machine;
  type_ = eh.e_type;

  size_t phnum = 0;
  if (elf_getphdrnum(elf_, &phnum) != 0) phnum = 0;
  bool first = true;
  for (size_t i = 0; i < phnum && i < 4096; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf_, static_cast<int>(i), &ph)) break;
    if (ph.p_type == PT_LOAD) {
      loads_.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz});
      if (first) {
        // Exactly libdwfl's rounding (dwfl_report_elf), junk align included.
        first_vaddr_ = ph.p_vaddr & (uint64_t{0} - ph.p_align);
        first = false;
      }
    }
  }
  build_id_ = gnu_build_id(elf_);

  size_t shnum = 0, shstrndx = 0;
  if (elf_getshdrnum(elf_, &shnum) != 0) shnum = 0;
  if (elf_getshdrstrndx(elf_, &shstrndx) != 0) shstrndx = SHN_UNDEF;
  Elf_Scn* scn = nullptr;
  size_t guard = 0;
  while ((scn = elf_nextscn(elf_, scn)) != nullptr && ++guard < 65536) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    if (sh.sh_type == SHT_SYMTAB && sh.sh_size > 0) has_symtab_ = true;
    const char* name = shstrndx != SHN_UNDEF ? elf_strptr(elf_, shstrndx, sh.sh_name) : nullptr;
    if (!name) continue;
    if ((std::strcmp(name, ".debug_info") == 0 || std::strcmp(name, ".zdebug_info") == 0) &&
        sh.sh_type != SHT_NOBITS && sh.sh_size > 0)
      has_debug_info_ = true;
    if (std::strcmp(name, ".gnu_debuglink") == 0 && sh.sh_type != SHT_NOBITS) {
      Elf_Data* d = elf_getdata(scn, nullptr);
      if (!d || !d->d_buf || d->d_size < 5) continue;
      const char* p = static_cast<const char*>(d->d_buf);
      size_t len = strnlen(p, d->d_size);
      if (len == 0 || len >= d->d_size) continue;
      size_t crc_off = (len + 4) & ~size_t{3};
      if (crc_off + 4 > d->d_size) continue;
      std::string link(p, len);
      if (link.find('/') != std::string::npos) continue;  // a name, never a path
      debuglink_ = std::move(link);
      std::memcpy(&debuglink_crc_, p + crc_off, 4);
    }
  }
  return true;
}

std::optional<uint64_t> ElfImage::load_bias(uint64_t map_start, uint64_t pgoff) const {
  // A PT_LOAD maps file [p_offset, p_offset+p_filesz) at p_vaddr; the kernel
  // maps it from the page holding p_offset, so the mapping of file offset
  // pgoff starts at vaddr p_vaddr - p_offset + pgoff (same page delta).
  const Load* best = nullptr;
  for (const auto& l : loads_) {
    uint64_t page_lo = l.offset & ~uint64_t{0xffff};  // up to 64 KiB pages
    uint64_t hi = l.offset + std::max<uint64_t>(l.filesz, 1);
    if (pgoff < page_lo || pgoff >= hi) continue;
    // Prefer the segment starting closest above/at pgoff's page.
    if (!best || (l.offset >= pgoff && (best->offset < pgoff || l.offset < best->offset))) best = &l;
  }
  if (!best) return std::nullopt;
  return map_start - pgoff - (best->vaddr - best->offset);
}

bool ElfImage::read(uint64_t off, void* out, size_t len) const {
  if (off > size_ || len > size_ - off) return false;
  std::memcpy(out, raw_ + off, len);
  return true;
}

uint32_t ElfImage::crc32() const {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  uint64_t off = 0;
  while (off < size_) {
    uInt chunk = static_cast<uInt>(std::min<uint64_t>(size_ - off, 1u << 30));
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(raw_ + off), chunk);
    off += chunk;
  }
  return static_cast<uint32_t>(crc);
}

void ElfImage::collect_symbols(std::vector<ElfSymbol>& out) const {
  size_t shnum = 0;
  if (elf_getshdrnum(elf_, &shnum) != 0) return;
  Elf_Scn* scn = nullptr;
  size_t guard = 0;
  while ((scn = elf_nextscn(elf_, scn)) != nullptr && ++guard < 65536) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) continue;
    if (sh.sh_entsize == 0 || sh.sh_link >= shnum) continue;
    Elf_Data* d = elf_getdata(scn, nullptr);
    if (!d || !d->d_buf) continue;
    size_t count = d->d_size / sizeof(Elf64_Sym);
    for (size_t i = 1; i < count; ++i) {
      GElf_Sym s;
      if (!gelf_getsym(d, static_cast<int>(i), &s)) break;
      if (!symbol_wanted(s, elf_, shnum)) continue;
      const char* name = elf_strptr(elf_, sh.sh_link, s.st_name);
      if (!name || !*name || name[0] == '$') continue;  // $x/$d: arm mapping symbols
      out.push_back({s.st_value, s.st_size, std::string_view(name)});
    }
  }
}

const std::vector<ElfSymbol>& ElfImage::symbols() const {
  if (!symbols_loaded_) {
    symbols_loaded_ = true;
    collect_symbols(symbols_);
    finish_symbol_table(symbols_);
  }
  return symbols_;
}

void finish_symbol_table(std::vector<ElfSymbol>& syms) {
  // By address; of aliases at one address keep a sized one, then the
  // public spelling ("malloc" over "__libc_malloc"), then the shortest.
  auto underscores = [](std::string_view n) { return n.find_first_not_of('_'); };
  std::sort(syms.begin(), syms.end(), [&](const ElfSymbol& a, const ElfSymbol& b) {
    if (a.addr != b.addr) return a.addr < b.addr;
    if ((a.size > 0) != (b.size > 0)) return a.size > 0;
    if (a.size != b.size) return a.size > b.size;
    if (underscores(a.name) != underscores(b.name)) return underscores(a.name) < underscores(b.name);
    if (a.name.size() != b.name.size()) return a.name.size() < b.name.size();
    return a.name < b.name;
  });
  syms.erase(std::unique(syms.begin(), syms.end(),
                         [](const ElfSymbol& a, const ElfSymbol& b) { return a.addr == b.addr; }),
             syms.end());
}

const ElfSymbol* lookup_symbol(const std::vector<ElfSymbol>& syms, uint64_t addr) {
  auto it = std::upper_bound(syms.begin(), syms.end(), addr,
                             [](uint64_t a, const ElfSymbol& s) { return a < s.addr; });
  if (it == syms.begin()) return nullptr;
  auto cand = it - 1;
  if (cand->size == 0) {
    uint64_t limit = it != syms.end() ? it->addr : cand->addr + kMaxSizelessSpan;
    return addr < limit && addr - cand->addr < kMaxSizelessSpan ? &*cand : nullptr;
  }
  // Walk back a little for an enclosing symbol (nested/overlapping sizes).
  for (int i = 0; i < 8; ++i) {
    if (addr < cand->addr + cand->size) return &*cand;
    if (cand == syms.begin()) break;
    --cand;
  }
  return nullptr;
}

}  // namespace jankbpf::stack
