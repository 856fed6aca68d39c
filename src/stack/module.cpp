#include "stack/module.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "elf/build_id.h"
#include "util/safe_open.h"

namespace jankbpf::stack {
namespace {

// A module keeps at most this many memoized addresses (and about this many
// bytes of them: a symbol's name can be long) before starting over.
constexpr size_t kMaxCachedAddresses = 200000;
constexpr size_t kMaxCachedBytes = 16u << 20;
// ModuleCache drops unused modules once it holds more than this many.
constexpr size_t kMaxCachedModules = 1024;

// The image attached to the module (attach_image): a new libelf handle on
// its private copy, which libdwfl ends with the module. No descriptor.
int image_find_elf(Dwfl_Module*, void** userdata, const char*, Dwarf_Addr, char**, Elf** elfp) {
  const auto* img = static_cast<const ElfImage*>(*userdata);
  if (img) *elfp = img->new_handle();
  return -1;
}

// Never a separate file: a Module reports the image holding its DWARF.
int no_debuginfo(Dwfl_Module*, void**, const char*, Dwarf_Addr, const char*, const char*, GElf_Word, char**) {
  return -1;
}

const Dwfl_Callbacks kModuleCallbacks = {
    .find_elf = image_find_elf,
    .find_debuginfo = no_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

const char* die_linkage_or_name(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name, DW_AT_name}) {
    if (dwarf_attr_integrate(die, at, &attr)) {
      const char* s = dwarf_formstring(&attr);
      if (s && *s) return s;
    }
  }
  return nullptr;
}

// Whether the file at `fd` is the debug file of `main`, from its headers
// (and, for a CRC match, its bytes read in chunks): before any of it is
// copied, so a wrong candidate costs no memory.
bool usable_candidate(const ElfImage& main, int fd, const struct stat& st, bool by_build_id) {
  if (static_cast<uint64_t>(st.st_dev) == main.dev() && static_cast<uint64_t>(st.st_ino) == main.inode()) return false;
  Elf64_Ehdr eh;
  if (::pread(fd, &eh, sizeof eh, 0) != static_cast<ssize_t>(sizeof eh) || eh.e_machine != main.machine())
    return false;
  if (by_build_id || !main.build_id().empty()) return read_build_id(fd) == main.build_id();
  if (static_cast<uint64_t>(st.st_size) > (1ull << 30)) return false;
  uLong crc = ::crc32(0L, Z_NULL, 0);
  std::vector<unsigned char> buf(1u << 20);
  for (off_t off = 0; off < st.st_size;) {
    ssize_t n = ::pread(fd, buf.data(), buf.size(), off);
    if (n <= 0) return false;
    crc = ::crc32(crc, buf.data(), static_cast<uInt>(n));
    off += n;
  }
  return static_cast<uint32_t>(crc) == main.debuglink_crc();
}

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return "";
  return path.substr(0, slash);
}

}  // namespace

const Dwfl_Callbacks* module_dwfl_callbacks() { return &kModuleCallbacks; }

void attach_image(Dwfl_Module* mod, const ElfImage* image) {
  void** userdata = nullptr;
  dwfl_module_info(mod, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  if (userdata) *userdata = const_cast<ElfImage*>(image);
}

Dwfl_Module* report_image(Dwfl* dwfl, const ElfImage& image, uint64_t bias, const char* name) {
  // The span its PT_LOADs cover, from libdwfl's own "vaddr" (the first one
  // rounded down to its alignment): the module's bias is then `bias`.
  const uint64_t start = bias + image.first_load_vaddr();
  const uint64_t end = std::max(bias + image.load_end_vaddr(), start + 1);
  Dwfl_Module* mod = dwfl_report_module(dwfl, name, start, end);
  if (mod) attach_image(mod, &image);
  return mod;
}

std::string demangle(std::string_view name) {
  if (name.size() < 3 || name.substr(0, 2) != "_Z" || name.size() > 4096) return std::string(name);
  std::string z(name);
  int status = 0;
  char* d = abi::__cxa_demangle(z.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !d) {
    std::free(d);
    return z;
  }
  std::string out(d);
  std::free(d);
  return out;
}

std::unique_ptr<ElfImage> find_debug_file(const ElfImage& elf, const DebugSearch& where,
                                          std::string* found_path, const ElfCopyLimits& limits) {
  // Inside each root (a container's, then the host's): its symlinks are
  // followed (.build-id entries are symlinks on some distros) but never out
  // of it, and only regular files of allowed owners are read.
  OpenPolicy policy;
  policy.max_size = ElfImage::kMaxFileBytes;
  policy.follow_symlinks = true;
  policy.owners = where.owners;
  auto try_in = [&](const std::string& root, const std::string& rel, bool by_build_id) -> std::unique_ptr<ElfImage> {
    Opened o = open_in_root(root, rel, policy);
    if (!o || !usable_candidate(elf, o.fd.get(), o.st, by_build_id)) return nullptr;
    // Its DWARF is copied later (load_dwarf), through the path if the
    // descriptor pool closed this one meanwhile.
    const struct stat st = o.st;
    auto cand = ElfImage::open(std::move(o.fd), limits, path_source(root + rel, policy, st));
    if (!cand) return nullptr;
    if (found_path) *found_path = root + rel;
    return cand;
  };
  const std::string& bid = elf.build_id();
  if (bid.size() > 2) {
    for (const auto& root : where.roots) {
      std::string p = "/usr/lib/debug/.build-id/" + bid.substr(0, 2) + "/" + bid.substr(2) + ".debug";
      if (auto d = try_in(root, p, true)) return d;
    }
  }
  const std::string& link = elf.debuglink();
  if (!link.empty() && !where.path.empty() && where.path[0] == '/') {
    std::string dir = dir_of(where.path);
    for (const auto& root : where.roots) {
      for (const std::string& p : {dir + "/" + link, dir + "/.debug/" + link, "/usr/lib/debug" + dir + "/" + link}) {
        if (auto d = try_in(root, p, false)) return d;
      }
    }
  }
  return nullptr;
}

Module::Module(std::unique_ptr<ElfImage> elf, std::string path, const DebugSearch& where,
               const ElfCopyLimits& limits)
    : path_(std::move(path)), elf_(std::move(elf)) {
  // Only worth a search when the file itself lacks something.
  if (!elf_->has_symtab() || !elf_->has_dwarf())
    debug_ = find_debug_file(*elf_, where, &debug_path_, limits);
}

Module::~Module() {
  if (dwfl_) dwfl_end(dwfl_);
}

void Module::load_symbols() {
  symbols_loaded_ = true;
  elf_->collect_symbols(symbols_);
  if (debug_) debug_->collect_symbols(symbols_);
  finish_symbol_table(symbols_);
}

bool Module::open_dwarf(std::chrono::steady_clock::time_point until) {
  // The file that holds the DWARF is reported as the module itself (a debug
  // file keeps the program headers, so the addresses are the same): libdwfl
  // finds its DWARF there and never asks for another file.
  ElfImage* dw = elf_->has_dwarf() ? elf_.get() : debug_ && debug_->has_dwarf() ? debug_.get() : nullptr;
  if (!dw) {
    dwarf_tried_ = true;
    return false;
  }
  if (!dw->load_dwarf(until)) {
    dwarf_tried_ = !dw->has_dwarf();  // refused for good, or more to copy next time
    return false;
  }
  dwarf_tried_ = true;
  dwfl_ = dwfl_begin(&kModuleCallbacks);
  if (!dwfl_) return false;
  dwfl_report_begin(dwfl_);
  // Bias 0: we look up by vaddr.
  dwmod_ = report_image(dwfl_, *dw, 0, path_.c_str());
  dwfl_report_end(dwfl_, nullptr, nullptr);
  return dwmod_ != nullptr;
}

void Module::dwarf_frames(uint64_t vaddr, Symbolized& out, std::chrono::steady_clock::time_point until) {
  if (!dwarf_tried_) open_dwarf(until);
  if (!dwmod_) return;
  Dwarf_Addr bias = 0;
  Dwarf_Die* cudie = dwfl_module_addrdie(dwmod_, vaddr, &bias);
  if (!cudie) return;

  const char* file = nullptr;
  int line = 0, col = 0;
  if (Dwfl_Line* l = dwfl_module_getsrc(dwmod_, vaddr)) {
    Dwarf_Addr a;
    file = dwfl_lineinfo(l, &a, &line, &col, nullptr, nullptr);
  }
  Dwarf_Files* files = nullptr;
  size_t nfiles = 0;
  if (dwarf_getsrcfiles(cudie, &files, &nfiles) != 0) files = nullptr;

  std::vector<SymbolizedFrame> frames;
  // The innermost scope at the address, then every scope holding that DIE
  // (dwarf_getscopes_die walks the concrete tree: an inlined call's
  // DW_TAG_inlined_subroutine, then its caller, out to the DW_TAG_subprogram).
  Dwarf_Die* scopes = nullptr;
  int n = dwarf_getscopes(cudie, vaddr - bias, &scopes);
  if (n > 0) {
    Dwarf_Die innermost = scopes[0];
    std::free(scopes);
    scopes = nullptr;
    n = dwarf_getscopes_die(&innermost, &scopes);
  }
  for (int i = 0; i < n && i < 256; ++i) {
    int tag = dwarf_tag(&scopes[i]);
    if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
    SymbolizedFrame f;
    if (const char* name = die_linkage_or_name(&scopes[i])) f.function = demangle(name);
    if (file) f.file = file;
    f.line = line > 0 ? static_cast<uint32_t>(line) : 0;
    f.column = col > 0 ? static_cast<uint32_t>(col) : 0;
    if (tag == DW_TAG_subprogram) {
      Dwarf_Addr lo;
      if (dwarf_lowpc(&scopes[i], &lo) == 0) {
        f.function_start = lo + bias;
        f.has_start = true;
      }
      frames.push_back(std::move(f));
      break;
    }
    f.inlined = true;
    frames.push_back(std::move(f));
    // The caller's location is this inlined call's site.
    Dwarf_Attribute attr;
    Dwarf_Word v = 0;
    file = nullptr;
    if (files && dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_file, &attr), &v) == 0 && v < nfiles)
      file = dwarf_filesrc(files, v, nullptr, nullptr);
    line = dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &attr), &v) == 0 ? static_cast<int>(v) : 0;
    col = dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_column, &attr), &v) == 0 ? static_cast<int>(v) : 0;
  }
  std::free(scopes);
  if (frames.empty() && file) {
    SymbolizedFrame f;
    f.file = file;
    f.line = line > 0 ? static_cast<uint32_t>(line) : 0;
    f.column = col > 0 ? static_cast<uint32_t>(col) : 0;
    frames.push_back(std::move(f));
  }
  out.frames = std::move(frames);
}

const Symbolized& Module::symbolize(uint64_t vaddr, bool lines, std::chrono::steady_clock::time_point until) {
  auto it = cache_.find(vaddr);
  if (it != cache_.end()) return it->second;
  if (cache_.size() >= kMaxCachedAddresses || cache_bytes_ >= kMaxCachedBytes) {
    cache_.clear();
    cache_bytes_ = 0;
    ++memo_resets_;
  }

  Symbolized r;
  if (lines) dwarf_frames(vaddr, r, until);
  const bool memo = !lines || dwarf_tried_;
  if (!symbols_loaded_) load_symbols();
  const ElfSymbol* sym = lookup_symbol(symbols_, vaddr);
  if (r.frames.empty() || r.frames.back().inlined) r.frames.emplace_back();
  SymbolizedFrame& phys = r.frames.back();
  if (sym) {
    // The ELF symbol names the physical function (full C++ signature).
    phys.function = demangle(sym->name);
    phys.function_start = sym->addr;
    phys.has_start = true;
  }
  if (!memo) {
    unmemoized_ = std::move(r);
    return unmemoized_;
  }
  for (const auto& f : r.frames) cache_bytes_ += sizeof f + f.function.size() + f.file.size();
  cache_bytes_ += 64;  // the entry itself
  return cache_.emplace(vaddr, std::move(r)).first->second;
}

namespace {

std::string make_key(uint64_t dev, uint64_t ino, uint64_t size, int64_t mtime_ns, int64_t ctime_ns,
                     const DebugSearch& where) {
  std::string key = std::to_string(dev) + ":" + std::to_string(ino) + ":" + std::to_string(size) + ":" +
                    std::to_string(mtime_ns) + ":" + std::to_string(ctime_ns);
  // A root by its directory's identity: /proc/PID/root differs per process,
  // the tree it names (the host's, one container's) does not. A root that
  // is gone (the process exited) is searched for nothing: it adds nothing,
  // or every exited process would key its own copy of the same libc.
  // NUL-separated: no root or owner can spell another's.
  for (const auto& r : where.roots) {
    struct stat st;
    if (::stat((r + "/").c_str(), &st) == 0)
      key += std::string("\0r", 2) + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  }
  for (uid_t u : where.owners) key += std::string("\0u", 2) + std::to_string(u);
  return key;
}

}  // namespace

std::string module_key(const ElfImage& elf, const DebugSearch& where) {
  return make_key(elf.dev(), elf.inode(), elf.file_size(), elf.mtime_ns(), elf.ctime_ns(), where);
}

std::string module_key(const struct stat& st, const DebugSearch& where) {
  return make_key(st.st_dev, st.st_ino, static_cast<uint64_t>(st.st_size),
                  int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec,
                  int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec, where);
}

std::shared_ptr<Module> ModuleCache::find(const std::string& key) {
  auto it = modules_.find(key);
  if (it == modules_.end()) return nullptr;
  hits_++;
  it->second.used = ++use_clock_;
  return it->second.module;
}

std::shared_ptr<Module> ModuleCache::get(std::unique_ptr<ElfImage> elf, const std::string& path,
                                         const DebugSearch& where) {
  std::string key = module_key(*elf, where);
  if (auto m = find(key)) return m;
  return insert(std::move(key), std::move(elf), path, where);
}

void ModuleCache::drop(std::unordered_map<std::string, Entry>::iterator it) {
  dropped_memo_resets_ += it->second.module->memo_resets();
  ++evictions_;
  modules_.erase(it);
}

std::shared_ptr<Module> ModuleCache::insert(std::string key, std::unique_ptr<ElfImage> elf,
                                            const std::string& path, const DebugSearch& where,
                                            const ElfCopyLimits& limits) {
  misses_++;
  if (modules_.size() >= kMaxCachedModules) {
    for (auto i = modules_.begin(); i != modules_.end();) {
      auto next = std::next(i);
      if (i->second.module.use_count() == 1) drop(i);
      i = next;
    }
  }
  auto m = std::make_shared<Module>(std::move(elf), path, where, limits);
  modules_.insert_or_assign(std::move(key), Entry{m, ++use_clock_});
  return m;
}

void ModuleCache::make_room(const BudgetLedger& ledger, uint64_t want, pid_t pid, uid_t uid) {
  while (ledger.headroom(pid, uid) < want) {
    // The uid's own unused modules; any unused one when the total is short.
    const uint64_t total = ledger.limits().total;
    const bool total_short = total && total - std::min(total, ledger.held()) < want;
    auto lru = modules_.end();
    for (auto i = modules_.begin(); i != modules_.end(); ++i)
      if (i->second.module.use_count() == 1 && (total_short || i->second.module->charged_uid() == uid) &&
          (lru == modules_.end() || i->second.used < lru->second.used))
        lru = i;
    if (lru == modules_.end()) return;  // nothing unused to drop
    drop(lru);
  }
}

uint64_t ModuleCache::memo_resets() const {
  uint64_t n = dropped_memo_resets_;
  for (const auto& [key, e] : modules_) n += e.module->memo_resets();
  return n;
}

}  // namespace jankbpf::stack
