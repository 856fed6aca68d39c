#include "stack/elf_image.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <unordered_map>

#include <zlib.h>

#include "elf/build_id.h"
#include "util/lazy_pages.h"
#include "util/own_clock.h"

namespace jankbpf::stack {
namespace {

void ensure_libelf() {
  static std::once_flag once;
  std::call_once(once, [] { elf_version(EV_CURRENT); });
}

// A zero-size symbol is trusted to cover at most this many bytes.
constexpr uint64_t kMaxSizelessSpan = 64 * 1024;
// Headers of a hostile file, bounded: section headers (a table of at most
// 4 MiB), and the section-name table.
constexpr uint64_t kMaxSections = 65535;
constexpr uint64_t kMaxShstrtab = 1u << 20;
// A compressed section claiming more than this once inflated is not read.
constexpr uint64_t kMaxInflated = 512ull << 20;
// What libelf keeps per section for each handle on the copy (Elf_Scn and
// its data descriptors), charged with the headers for two handles.
constexpr uint64_t kHandleBytesPerSection = 2 * 256;
// Copied and CRC'd in chunks of this size (a deadline is checked between).
constexpr size_t kChunk = 1u << 20;
// A debug-link CRC is computed over files of at most this size.
constexpr uint64_t kMaxCrcBytes = 1ull << 30;

uint64_t page_size() {
  static const uint64_t p = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return p;
}

bool pread_full(int fd, void* buf, size_t len, uint64_t off) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = ::pread(fd, static_cast<char*>(buf) + got, len - got, static_cast<off_t>(off + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

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

// The original files' descriptors, for reads outside the copies: at most
// kMaxElfSourceFds open; the least recently used is closed, and its image
// reopens the file (ElfSource) when it needs it again.
class SourcePool {
 public:
  static SourcePool& get() {
    static SourcePool* pool = new SourcePool;  // never destroyed: images may outlive statics
    return *pool;
  }
  void put(const void* owner, Fd fd) {
    std::lock_guard lk(mu_);
    insert_locked(owner, std::make_shared<Fd>(std::move(fd)));
  }
  std::shared_ptr<Fd> fd_of(const void* owner, const ElfSource* source) {
    {
      std::lock_guard lk(mu_);
      auto it = index_.find(owner);
      if (it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        return it->second->second;
      }
    }
    if (!source) return nullptr;
    Fd fd = source->reopen();  // outside the lock: a path lookup
    if (!fd) return nullptr;
    auto shared = std::make_shared<Fd>(std::move(fd));
    std::lock_guard lk(mu_);
    if (!index_.count(owner)) insert_locked(owner, shared);
    return shared;
  }
  void drop(const void* owner) {
    std::lock_guard lk(mu_);
    auto it = index_.find(owner);
    if (it == index_.end()) return;
    lru_.erase(it->second);
    index_.erase(it);
  }
  size_t open() {
    std::lock_guard lk(mu_);
    return lru_.size();
  }

 private:
  using Entry = std::pair<const void*, std::shared_ptr<Fd>>;
  void insert_locked(const void* owner, std::shared_ptr<Fd> fd) {
    if (auto it = index_.find(owner); it != index_.end()) {
      lru_.erase(it->second);
      index_.erase(it);
    }
    while (lru_.size() >= kMaxElfSourceFds) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    lru_.emplace_front(owner, std::move(fd));
    index_[owner] = lru_.begin();
  }
  std::mutex mu_;
  std::list<Entry> lru_;
  std::unordered_map<const void*, std::list<Entry>::iterator> index_;
};

// Reopens a path (in its root, as first opened) and keeps it only if it is
// still the very file the image was made from.
class PathSource final : public ElfSource {
 public:
  PathSource(std::string path, OpenPolicy policy, const struct stat& st)
      : path_(std::move(path)), policy_(std::move(policy)), st_(st) {}
  Fd reopen() const override {
    Opened o = open_untrusted(path_, policy_);
    if (!o || o.st.st_dev != st_.st_dev || o.st.st_ino != st_.st_ino || o.st.st_size != st_.st_size ||
        o.st.st_mtim.tv_sec != st_.st_mtim.tv_sec || o.st.st_mtim.tv_nsec != st_.st_mtim.tv_nsec)
      return Fd();
    return std::move(o.fd);
  }

 private:
  std::string path_;
  OpenPolicy policy_;
  struct stat st_;
};

}  // namespace

size_t elf_source_fds_open() { return SourcePool::get().open(); }

std::unique_ptr<ElfSource> path_source(std::string path, OpenPolicy policy, const struct stat& st) {
  return std::make_unique<PathSource>(std::move(path), std::move(policy), st);
}

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

// What to copy, decided from the headers alone: items in the order they
// are worth having, each all or nothing (a symbol table with its strings,
// the DWARF sections together).
struct ElfImage::Plan {
  Elf64_Ehdr eh{};
  std::vector<Elf64_Phdr> ph;
  std::vector<Elf64_Shdr> sh;
  uint64_t shoff = 0;  // where the section headers are (0: none)
  struct Item {
    std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [off, off + len)
    std::vector<size_t> sections;                       // indexes in sh
    uint64_t extra = 0;   // charged on top of the pages: inflated sections, symbol tables
    int kind = 0;         // 1: .symtab, 2: DWARF
    bool copied = false;
  };
  std::vector<Item> items;
  bool small = false;  // copied whole
};

namespace {

bool is_dwarf_name(std::string_view n) {
  static constexpr std::string_view kNames[] = {
      "info", "abbrev", "line", "str", "line_str", "ranges", "rnglists", "aranges", "str_offsets", "addr", "types"};
  for (std::string_view prefix : {std::string_view(".debug_"), std::string_view(".zdebug_")})
    if (n.starts_with(prefix)) {
      std::string_view rest = n.substr(prefix.size());
      for (auto k : kNames)
        if (rest == k) return true;
    }
  return false;
}

// Pages covered by [off, off + len).
std::pair<uint64_t, uint64_t> pages_of(uint64_t off, uint64_t len) {
  const uint64_t p = page_size();
  return {off / p, (off + len + p - 1) / p};
}

// Pages in `add` not yet in `have` (sorted, disjoint page ranges).
uint64_t new_pages(const std::vector<std::pair<uint64_t, uint64_t>>& have, std::pair<uint64_t, uint64_t> add) {
  uint64_t n = add.second - add.first;
  for (const auto& [a, b] : have) {
    uint64_t lo = std::max(a, add.first), hi = std::min(b, add.second);
    if (lo < hi) n -= hi - lo;
  }
  return n;
}

void add_pages(std::vector<std::pair<uint64_t, uint64_t>>& have, std::pair<uint64_t, uint64_t> add) {
  have.push_back(add);
  std::sort(have.begin(), have.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto& r : have) {
    if (!merged.empty() && r.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  have = std::move(merged);
}

// Decompressed size a compressed section claims (SHF_COMPRESSED's Chdr or a
// .zdebug_ section's "ZLIB" header), 0 if unreadable.
uint64_t inflated_size(int fd, const Elf64_Shdr& s, std::string_view name) {
  if (s.sh_flags & SHF_COMPRESSED) {
    Elf64_Chdr ch;
    return s.sh_size >= sizeof ch && pread_full(fd, &ch, sizeof ch, s.sh_offset) ? ch.ch_size : 0;
  }
  if (name.starts_with(".zdebug_")) {
    unsigned char h[12];
    if (s.sh_size < sizeof h || !pread_full(fd, h, sizeof h, s.sh_offset) || std::memcmp(h, "ZLIB", 4) != 0) return 0;
    uint64_t v = 0;
    for (int i = 4; i < 12; ++i) v = v << 8 | h[i];
    return v;
  }
  return 0;
}

}  // namespace

std::unique_ptr<ElfImage> ElfImage::open_path(const std::string& path) {
  OpenPolicy p;
  p.max_size = kMaxFileBytes;
  p.follow_symlinks = true;
  return open_path(path, p);
}

std::unique_ptr<ElfImage> ElfImage::open_path(const std::string& path, const OpenPolicy& policy,
                                              const ElfCopyLimits& limits) {
  Opened o = open_untrusted(path, policy);
  if (!o) return nullptr;
  auto source = std::make_unique<PathSource>(path, policy, o.st);
  return open(std::move(o.fd), limits, std::move(source));
}

std::unique_ptr<ElfImage> ElfImage::open(Fd fd, const ElfCopyLimits& limits, std::unique_ptr<ElfSource> source) {
  if (!fd) return nullptr;
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr)) ||
      static_cast<uint64_t>(st.st_size) > kMaxFileBytes)
    return nullptr;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  Plan plan;
  auto inside = [&](uint64_t off, uint64_t len) { return off <= size && len <= size - off; };
  Elf64_Ehdr& eh = plan.eh;
  if (!pread_full(fd.get(), &eh, sizeof eh, 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return nullptr;

  // Headers: the ELF header, program headers, section headers and names.
  Plan::Item headers;
  headers.ranges.push_back({0, sizeof eh});
  if (eh.e_phnum && eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < PN_XNUM &&
      inside(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr))) {
    plan.ph.resize(eh.e_phnum);
    if (!pread_full(fd.get(), plan.ph.data(), plan.ph.size() * sizeof(Elf64_Phdr), eh.e_phoff)) return nullptr;
    headers.ranges.push_back({eh.e_phoff, plan.ph.size() * sizeof(Elf64_Phdr)});
  }
  uint64_t shnum = eh.e_shnum;
  size_t shstrndx = eh.e_shstrndx;
  if (eh.e_shoff && eh.e_shentsize == sizeof(Elf64_Shdr) && inside(eh.e_shoff, sizeof(Elf64_Shdr))) {
    Elf64_Shdr first;
    if (!pread_full(fd.get(), &first, sizeof first, eh.e_shoff)) return nullptr;
    if (shnum == 0) shnum = first.sh_size;  // more than SHN_LORESERVE sections
    if (shstrndx == SHN_XINDEX) shstrndx = first.sh_link;
    if (shnum > 0 && shnum <= kMaxSections && inside(eh.e_shoff, shnum * sizeof(Elf64_Shdr))) {
      plan.sh.resize(shnum);
      if (!pread_full(fd.get(), plan.sh.data(), shnum * sizeof(Elf64_Shdr), eh.e_shoff)) return nullptr;
      plan.shoff = eh.e_shoff;
      headers.ranges.push_back({eh.e_shoff, shnum * sizeof(Elf64_Shdr)});
      headers.extra = shnum * kHandleBytesPerSection;
    }
  }
  std::string names;
  if (!plan.sh.empty() && shstrndx < plan.sh.size()) {
    const Elf64_Shdr& s = plan.sh[shstrndx];
    if (s.sh_type == SHT_STRTAB && s.sh_size <= kMaxShstrtab && inside(s.sh_offset, s.sh_size)) {
      names.resize(s.sh_size);
      if (!pread_full(fd.get(), names.data(), names.size(), s.sh_offset)) names.clear();
      else {
        headers.ranges.push_back({s.sh_offset, s.sh_size});
        headers.sections.push_back(shstrndx);
      }
    }
  }
  plan.items.push_back(std::move(headers));

  auto name_of = [&](const Elf64_Shdr& s) -> std::string_view {
    if (s.sh_name >= names.size()) return {};
    size_t end = names.find('\0', s.sh_name);
    return end == std::string::npos ? std::string_view() : std::string_view(names).substr(s.sh_name, end - s.sh_name);
  };
  auto has_bytes = [&](size_t i) {
    const Elf64_Shdr& s = plan.sh[i];
    return i > 0 && s.sh_type != SHT_NOBITS && s.sh_type != SHT_NULL && s.sh_size > 0 && inside(s.sh_offset, s.sh_size);
  };
  auto section_item = [&](std::initializer_list<size_t> idx, int kind = 0) {
    Plan::Item it;
    it.kind = kind;
    for (size_t i : idx) {
      if (!has_bytes(i)) return;
      it.ranges.push_back({plan.sh[i].sh_offset, plan.sh[i].sh_size});
      it.sections.push_back(i);
    }
    plan.items.push_back(std::move(it));
  };
  // A symbol table with its strings; its entries as ElfSymbols (its
  // module's table) are charged with it.
  auto symtab_item = [&](uint32_t type, int kind) {
    for (size_t i = 1; i < plan.sh.size(); ++i) {
      const Elf64_Shdr& s = plan.sh[i];
      if (s.sh_type != type || s.sh_link >= plan.sh.size() || !has_bytes(i) || !has_bytes(s.sh_link)) continue;
      size_t before = plan.items.size();
      section_item({i, s.sh_link}, kind);
      if (plan.items.size() > before) plan.items.back().extra = s.sh_size / sizeof(Elf64_Sym) * sizeof(ElfSymbol);
      return;
    }
  };
  auto named_item = [&](std::string_view want) {
    for (size_t i = 1; i < plan.sh.size(); ++i)
      if (name_of(plan.sh[i]) == want) return section_item({i});
  };
  // 1. What unwinding and naming need: exported symbols, CFI, the debug
  // link, the USDT notes, the build-id note.
  symtab_item(SHT_DYNSYM, 0);
  for (std::string_view n : {".eh_frame_hdr", ".eh_frame", ".gnu_debuglink", ".gnu_debugaltlink", ".note.stapsdt",
                             ".note.gnu.build-id"})
    named_item(n);
  // A file without section headers (sstrip'd): its CFI is found through
  // PT_GNU_EH_FRAME, and .eh_frame runs to the end of the segment holding it.
  if (plan.sh.empty())
    for (const auto& p : plan.ph)
      if (p.p_type == PT_GNU_EH_FRAME)
        for (const auto& l : plan.ph)
          if (l.p_type == PT_LOAD && p.p_offset >= l.p_offset && p.p_offset - l.p_offset < l.p_filesz &&
              inside(l.p_offset, l.p_filesz))
            plan.items.push_back({{{l.p_offset, l.p_filesz}}, {}, 0, 0, false});
  // 2. Full symbols, and CFI kept out of .eh_frame.
  symtab_item(SHT_SYMTAB, 1);
  named_item(".debug_frame");
  // 3. DWARF (file:line, inlined frames): all of it or none.
  {
    Plan::Item dw;
    dw.kind = 2;
    bool ok = true, info = false;
    for (size_t i = 1; i < plan.sh.size() && ok; ++i) {
      std::string_view n = name_of(plan.sh[i]);
      if (!is_dwarf_name(n) || !has_bytes(i)) continue;
      uint64_t inflated = inflated_size(fd.get(), plan.sh[i], n);
      if (inflated > kMaxInflated) ok = false;
      dw.extra += inflated;
      dw.ranges.push_back({plan.sh[i].sh_offset, plan.sh[i].sh_size});
      dw.sections.push_back(i);
      info |= n == ".debug_info" || n == ".zdebug_info";
    }
    if (!ok && info) dw.extra = UINT64_MAX;  // never fits: counted as over the budget
    if (info) plan.items.push_back(std::move(dw));
  }
  // Whole small files (their DWARF too, at once): no source needed afterwards.
  plan.small = size <= kCopyWholeBelow;
  if (plan.small) plan.items.push_back({{{0, size}}, {}, 0, 0, false});

  ensure_libelf();
  std::unique_ptr<ElfImage> img(new ElfImage());
  img->size_ = size;
  img->dev_ = st.st_dev;
  img->ino_ = st.st_ino;
  img->mtime_ns_ = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  img->ctime_ns_ = int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
  // The build-id from the file itself, its notes walked by header
  // (bounded: a note may claim the whole file).
  img->build_id_ = read_build_id(fd.get());
  if (!img->copy_in(fd.get(), plan, limits) || !img->init_from_copy()) return nullptr;
  const bool whole = img->copied(0, size) && img->dwarf_ != Dwarf::Pending;
  img->source_ = std::move(source);
  if (!whole) SourcePool::get().put(img.get(), std::move(fd));
  return img;
}

bool ElfImage::copy_in(int fd, Plan& plan, const ElfCopyLimits& limits) {
  const auto started = util::own_now();  // the file's own time: load on the host is not its cost
  limits_ = limits;
  // Choose, in order, the items that fit the file's limit and the ledger's
  // headroom; one that does not is left out (and counted as a cut). DWARF
  // is not copied now: it is set aside for load_dwarf().
  uint64_t budget = limits.max_copy;
  if (limits.ledger) budget = std::min(budget, limits.ledger->headroom(limits.pid, limits.uid));
  std::vector<std::pair<uint64_t, uint64_t>> pages;
  uint64_t cost = 0;
  Plan::Item* dwarf = nullptr;
  for (size_t k = 0; k < plan.items.size(); ++k) {
    Plan::Item& it = plan.items[k];
    if (it.kind == 2 && !plan.small) {
      dwarf = &it;
      continue;
    }
    uint64_t add = it.extra;
    auto trial = pages;
    for (const auto& [off, len] : it.ranges) {
      auto pr = pages_of(off, len);
      add = add > UINT64_MAX / 2 ? add : add + new_pages(trial, pr) * page_size();
      add_pages(trial, pr);
    }
    if (add > budget - std::min(budget, cost)) {
      if (k == 0) return false;  // not even the headers
      cut_ |= kBudgetElfBytes;
      continue;
    }
    it.copied = true;
    cost += add;
    pages = std::move(trial);
  }
  if (dwarf) {
    deferred_.cost = dwarf->extra;
    auto trial = pages;
    for (const auto& [off, len] : dwarf->ranges) {
      auto pr = pages_of(off, len);
      deferred_.cost = deferred_.cost > UINT64_MAX / 2 ? deferred_.cost : deferred_.cost + new_pages(trial, pr) * page_size();
      add_pages(trial, pr);
    }
    deferred_.ranges = dwarf->ranges;
    dwarf_ = deferred_.cost > limits.max_copy ? Dwarf::Refused : Dwarf::Pending;
    if (dwarf_ == Dwarf::Refused) cut_ |= kBudgetElfBytes;
  }
  bool ok = true;
  charge_ = limits.ledger ? limits.ledger->charge(limits.pid, limits.uid, cost, &ok) : BudgetLedger::Charge();
  if (!limits.ledger) charge_.resize(cost);  // counted only
  if (!ok) return false;
  // The copy: anonymous memory the size of the file up to the last byte
  // wanted (DWARF included, for later); untouched pages cost nothing.
  uint64_t end = 0;
  for (const auto& it : plan.items)
    if (it.copied || &it == dwarf)
      for (const auto& [off, len] : it.ranges) end = std::max(end, off + len);
  if (dwarf && dwarf_ == Dwarf::Pending && limits.lazy_dwarf) plan_inflated(fd, dwarf->sections, plan.sh, &end);
  image_size_ = static_cast<size_t>(end);
  void* m = ::mmap(nullptr, image_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    image_ = nullptr;
    return false;
  }
  image_ = static_cast<char*>(m);
  for (size_t k = 0; k < plan.items.size(); ++k) {
    Plan::Item& it = plan.items[k];
    if (!it.copied) continue;
    for (const auto& [off, len] : it.ranges) {
      uint64_t done = 0;
      const auto until = k == 0 || limits.time == std::chrono::milliseconds::max() ? std::chrono::steady_clock::time_point::max()
                                                                                     : started + limits.time;
      if (!copy_range(fd, off, len, until, &done)) {
        if (done < len && util::own_now() > until) cut_ |= kBudgetTime;
        it.copied = false;
        break;
      }
    }
    if (!it.copied && k == 0) return false;
  }
  // What the copy holds, and what libelf may look at: sections not copied
  // become SHT_NOBITS (no bytes to read), notes not copied PT_NULL.
  std::vector<bool> kept(plan.sh.size(), false);
  std::vector<std::pair<uint64_t, uint64_t>> held;
  for (const auto& it : plan.items) {
    if (!it.copied) continue;
    for (size_t i : it.sections) kept[i] = true;
    for (const auto& [off, len] : it.ranges) held.push_back({off, off + len});
    has_symtab_ |= it.kind == 1;
    if (it.kind == 2) dwarf_ = Dwarf::Loaded;  // a small file's, copied with it
  }
  std::sort(held.begin(), held.end());
  for (const auto& r : held) {
    if (!ranges_.empty() && r.first <= ranges_.back().second) ranges_.back().second = std::max(ranges_.back().second, r.second);
    else ranges_.push_back(r);
  }
  for (size_t i = 1; i < plan.sh.size(); ++i) {
    Elf64_Shdr s = plan.sh[i];
    if (kept[i] || s.sh_type == SHT_NOBITS || s.sh_type == SHT_NULL) continue;
    if (copied(s.sh_offset, s.sh_size)) continue;  // in a copied range all the same (a whole small file)
    const uint64_t at = plan.shoff + i * sizeof s;
    if (dwarf && dwarf_ == Dwarf::Pending &&
        std::find(dwarf->sections.begin(), dwarf->sections.end(), i) != dwarf->sections.end()) {
      deferred_.headers.push_back({at, s});  // restored once load_dwarf() copied it
      for (auto& f : inflated_)
        if (f.section == i) f.at = at;
    }
    s.sh_type = SHT_NOBITS;
    s.sh_flags &= ~static_cast<uint64_t>(SHF_COMPRESSED);
    std::memcpy(image_ + at, &s, sizeof s);
  }
  // Without the tables they describe, the ELF header names none.
  Elf64_Ehdr eh = plan.eh;
  if (plan.ph.empty()) eh.e_phoff = eh.e_phnum = 0;
  if (plan.sh.empty()) eh.e_shoff = eh.e_shnum = eh.e_shstrndx = 0;
  std::memcpy(image_, &eh, sizeof eh);
  for (size_t i = 0; i < plan.ph.size(); ++i) {
    Elf64_Phdr p = plan.ph[i];
    if ((p.p_type == PT_NOTE || p.p_type == PT_GNU_EH_FRAME) && !copied(p.p_offset, p.p_filesz)) {
      p.p_type = PT_NULL;
      std::memcpy(image_ + plan.eh.e_phoff + i * sizeof p, &p, sizeof p);
    }
    if (p.p_type == PT_LOAD) {
      loads_.push_back({p.p_vaddr, p.p_offset, p.p_filesz, p.p_memsz});
      if (loads_.size() == 1) first_vaddr_ = p.p_vaddr & (uint64_t{0} - p.p_align);  // libdwfl's rounding, junk align too
      end_vaddr_ = std::max(end_vaddr_, p.p_vaddr + p.p_memsz);
    }
  }
  recount();
  return true;
}

void ElfImage::recount() {
  copied_ = 0;
  for (const auto& r : ranges_) {
    auto pr = pages_of(r.first, r.second - r.first);
    copied_ += (pr.second - pr.first) * page_size();
  }
}

bool ElfImage::copy_range(int fd, uint64_t off, uint64_t len, std::chrono::steady_clock::time_point until,
                          uint64_t* done) {
  while (*done < len) {
    if (util::own_now() > until) return false;
    size_t n = static_cast<size_t>(std::min<uint64_t>(len - *done, kChunk));
    if (!pread_full(fd, image_ + off + *done, n, off + *done)) return false;  // shrank meanwhile
    *done += n;
  }
  return true;
}

bool ElfImage::load_dwarf(std::chrono::steady_clock::time_point until) {
  if (dwarf_ == Dwarf::Loaded) return true;
  if (dwarf_ != Dwarf::Pending) return false;
  Deferred& d = deferred_;
  if (!d.charged) {
    // Within the file's limit and what its process and uid have left now.
    if (charge_.bytes() + d.cost > limits_.max_copy || !charge_.resize(charge_.bytes() + d.cost)) {
      dwarf_ = Dwarf::Refused;
      cut_ |= kBudgetElfBytes;
      return false;
    }
    d.charged = true;
  }
  auto fd = SourcePool::get().fd_of(this, source_.get());
  if (!fd || !*fd) {
    dwarf_ = Dwarf::Refused;  // the file is gone (or replaced): no DWARF from it
    return false;
  }
  if (limits_.lazy_dwarf && d.range == 0 && d.done == 0 && load_dwarf_lazily(fd->get())) d.range = d.ranges.size();
  while (d.range < d.ranges.size()) {
    const auto& [off, len] = d.ranges[d.range];
    if (!copy_range(fd->get(), off, len, until, &d.done)) {
      if (d.done < len && util::own_now() <= until) dwarf_ = Dwarf::Refused;  // unreadable
      return false;
    }
    ++d.range;
    d.done = 0;
  }
  for (auto [at, hdr] : d.headers) {
    for (const auto& f : inflated_)
      if (f.index && f.at == at) {  // shown inflated, in its slot
        hdr.sh_offset = f.slot;
        hdr.sh_size = f.size;
        hdr.sh_addralign = f.align;
        hdr.sh_flags &= ~static_cast<uint64_t>(SHF_COMPRESSED);
      }
    std::memcpy(image_ + at, &hdr, sizeof hdr);
  }
  for (const auto& [off, len] : d.ranges) ranges_.push_back({off, off + len});
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<uint64_t, uint64_t>> merged;
  for (const auto& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second) merged.back().second = std::max(merged.back().second, r.second);
    else merged.push_back(r);
  }
  ranges_ = std::move(merged);
  recount();
  dwarf_ = Dwarf::Loaded;
  d = Deferred{};
  return true;
}

// The DWARF's pages are registered to be read from the file at first touch.
// A page it shares with a section copied before (present already, so never
// faulted) gets the DWARF's bytes in it now; every other page of its span
// holds file bytes only, the file's own, read whole.
bool ElfImage::load_dwarf_lazily(int fd) {
  auto& lazy = util::LazyPages::get();
  if (!lazy.available()) return false;
  const uint64_t ps = page_size();
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& [off, len] : deferred_.ranges) {
    if (!len) continue;
    lo = std::min(lo, off);
    hi = std::max(hi, off + len);
  }
  if (lo >= hi) return false;
  for (const auto& [off, len] : deferred_.ranges) {
    if (!len) continue;
    const uint64_t end = off + len;
    const uint64_t head = std::min(end, (off / ps + 1) * ps);  // the rest of its first page
    const uint64_t tail = std::max(head, (end - 1) / ps * ps);  // the start of its last page
    if (!pread_full(fd, image_ + off, head - off, off)) return false;
    if (tail < end && !pread_full(fd, image_ + tail, end - tail, tail)) return false;
  }
  lo = lo / ps * ps;
  hi = std::min<uint64_t>((hi + ps - 1) / ps * ps, (image_size_ + ps - 1) / ps * ps);
  auto fill = [this](uint64_t off, char* buf, size_t n) -> size_t {
    auto f = SourcePool::get().fd_of(this, source_.get());
    if (!f || !*f) return 0;  // gone or replaced: zeros, which libdw refuses
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::pread(f->get(), buf + got, n - got, static_cast<off_t>(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    return got;
  };
  if (!lazy.add(image_ + lo, hi - lo, lo, fill)) return false;
  lazy_ = image_ + lo;
  load_inflated(fd);
  return true;
}

// Slots past the copy's end for the compressed DWARF sections (zlib, the
// ELF way), when their pages can be filled lazily: untouched, they cost
// address space only.
void ElfImage::plan_inflated(int fd, const std::vector<size_t>& sections, const std::vector<Elf64_Shdr>& sh,
                             uint64_t* end) {
  if (!util::LazyPages::get().available()) return;
  const uint64_t ps = page_size();
  uint64_t at = (*end + ps - 1) / ps * ps;
  for (size_t i : sections) {
    if (i >= sh.size() || !(sh[i].sh_flags & SHF_COMPRESSED)) continue;
    const Elf64_Shdr& s = sh[i];
    Elf64_Chdr ch;
    if (s.sh_size <= sizeof ch || !pread_full(fd, &ch, sizeof ch, s.sh_offset)) continue;
    if (ch.ch_type != ELFCOMPRESS_ZLIB || ch.ch_size == 0 || ch.ch_size > kMaxInflated) continue;
    if (at > kMaxFileBytes + kMaxInflated * 4) break;  // address space, not memory: still bounded
    Inflated f;
    f.section = i;
    f.slot = at;
    f.size = ch.ch_size;
    f.align = ch.ch_addralign && ch.ch_addralign <= ps && !(ch.ch_addralign & (ch.ch_addralign - 1)) ? ch.ch_addralign : 1;
    f.stream_off = s.sh_offset + sizeof ch;
    f.stream_len = s.sh_size - sizeof ch;
    inflated_.push_back(std::move(f));
    at = (at + ch.ch_size + ps - 1) / ps * ps;
  }
  if (!inflated_.empty()) *end = at;
}

// One pass over each compressed section builds its index; its slot's pages
// are then inflated from the nearest access point when libdw touches them.
// A section whose stream does not inflate to the size it claims keeps its
// header: libelf inflates it (or refuses it) as before.
// The compressed stream of `f` as read from `fd`, for its index.
InflateIndex::Reader ElfImage::stream_reader(int fd, const Inflated& f) {
  return [fd, &f](uint64_t off, uint8_t* buf, size_t n) -> size_t {
    if (off >= f.stream_len) return 0;
    n = static_cast<size_t>(std::min<uint64_t>(n, f.stream_len - off));
    return pread_full(fd, buf, n, f.stream_off + off) ? n : 0;
  };
}

void ElfImage::load_inflated(int fd) {
  if (inflated_.empty()) return;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (auto& f : inflated_) {
    if (f.at == 0) continue;
    auto index = std::make_unique<InflateIndex>();
    if (!index->build(stream_reader(fd, f), f.stream_len, f.size)) continue;
    f.index = std::move(index);
    lo = std::min(lo, f.slot);
    hi = std::max(hi, f.slot + f.size);
  }
  if (lo >= hi) return;
  const uint64_t ps = page_size();
  hi = std::min<uint64_t>((hi + ps - 1) / ps * ps, image_size_);
  auto fill = [this](uint64_t off, char* buf, size_t n) -> size_t {
    std::memset(buf, 0, n);
    auto src = SourcePool::get().fd_of(this, source_.get());
    if (!src || !*src) return n;  // gone or replaced: zeros, which libdw refuses
    const int sfd = src->get();
    for (const auto& f : inflated_) {
      if (!f.index || off + n <= f.slot || off >= f.slot + f.size) continue;
      const uint64_t from = std::max(off, f.slot), to = std::min(off + n, f.slot + f.size);
      f.index->read(stream_reader(sfd, f), from - f.slot, reinterpret_cast<uint8_t*>(buf + (from - off)), static_cast<size_t>(to - from));
    }
    return n;
  };
  if (!util::LazyPages::get().add(image_ + lo, hi - lo, lo, fill)) {
    for (auto& f : inflated_) f.index.reset();  // libelf inflates them, as without slots
    return;
  }
  lazy_inflated_ = image_ + lo;
}

bool ElfImage::init_from_copy() {
  elf_ = elf_memory(image_, image_size_);
  if (!elf_ || elf_kind(elf_) != ELF_K_ELF || gelf_getclass(elf_) != ELFCLASS64) return false;
  GElf_Ehdr eh;
  if (!gelf_getehdr(elf_, &eh)) return false;
  machine_ = eh.e_machine;
  type_ = eh.e_type;
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf_, &shstrndx) != 0) shstrndx = SHN_UNDEF;
  Elf_Scn* scn = nullptr;
  size_t guard = 0;
  while ((scn = elf_nextscn(elf_, scn)) != nullptr && ++guard < 65536) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS) continue;
    const char* name = shstrndx != SHN_UNDEF ? elf_strptr(elf_, shstrndx, sh.sh_name) : nullptr;
    if (!name || std::strcmp(name, ".gnu_debuglink") != 0) continue;
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
  return true;
}

ElfImage::~ElfImage() {
  if (elf_) elf_end(elf_);
  if (lazy_) util::LazyPages::get().remove(lazy_);  // before the unmap: no fault served from it after
  if (lazy_inflated_) util::LazyPages::get().remove(lazy_inflated_);
  if (image_) ::munmap(image_, image_size_);
  SourcePool::get().drop(this);
}

Elf* ElfImage::new_handle() const {
  ensure_libelf();
  return elf_memory(image_, image_size_);
}

bool ElfImage::copied(uint64_t off, size_t len) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), off,
                             [](uint64_t o, const std::pair<uint64_t, uint64_t>& r) { return o < r.first; });
  if (it == ranges_.begin()) return false;
  --it;
  return off >= it->first && off <= it->second && len <= it->second - off;
}

bool ElfImage::read_file(uint64_t off, void* out, size_t len) const {
  auto fd = SourcePool::get().fd_of(this, source_.get());
  return fd && *fd && pread_full(fd->get(), out, len, off);
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
  if (copied(off, len)) {
    std::memcpy(out, image_ + off, len);
    return true;
  }
  return read_file(off, out, len);
}

std::optional<uint32_t> ElfImage::crc32() const {
  if (size_ > kMaxCrcBytes) return std::nullopt;
  uLong crc = ::crc32(0L, Z_NULL, 0);
  std::vector<unsigned char> buf(std::min<uint64_t>(size_, kChunk));
  for (uint64_t off = 0; off < size_;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(size_ - off, kChunk));
    if (!read(off, buf.data(), n)) return std::nullopt;
    crc = ::crc32(crc, buf.data(), static_cast<uInt>(n));
    off += n;
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
