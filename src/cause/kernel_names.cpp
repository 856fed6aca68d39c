#include "cause/kernel_names.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cause/identity.h"
#include "jankbpf/events.h"
#include "stack/kallsyms.h"
#include "stack/maps.h"

namespace jankbpf::cause {

KernelObjects KernelObjects::parse(std::string_view text) {
  KernelObjects out;
  size_t pos = 0;
  while (pos < text.size() && out.syms_.size() < kMaxSymbols) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    // ADDR TYPE NAME [\t[MODULE]]
    const size_t sp1 = line.find(' ');
    if (sp1 == std::string_view::npos || sp1 == 0 || sp1 > 16 || line.size() < sp1 + 4 || line[sp1 + 2] != ' ')
      continue;
    const char type = line[sp1 + 1];
    if (!strchr("dDbBrR", type)) continue;
    uint64_t addr = 0;
    bool ok = true;
    for (char c : line.substr(0, sp1)) {
      int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (v < 0) {
        ok = false;
        break;
      }
      addr = addr << 4 | static_cast<uint64_t>(v);
    }
    if (!ok || !addr) continue;
    std::string_view name = line.substr(sp1 + 3);
    name = name.substr(0, std::min(name.find_first_of("\t "), size_t{128}));
    if (name.empty()) continue;
    out.syms_.push_back({addr, safe_name(std::string(name), 128)});
  }
  std::sort(out.syms_.begin(), out.syms_.end(), [](const Sym& a, const Sym& b) { return a.addr < b.addr; });
  return out;
}

KernelObjects KernelObjects::load(const std::string& path) {
  std::string text;
  if (!stack::read_small_file(path, text, 256u << 20)) return {};
  return parse(text);
}

std::string KernelObjects::name_of(uint64_t addr) const {
  auto it = std::upper_bound(syms_.begin(), syms_.end(), addr, [](uint64_t a, const Sym& s) { return a < s.addr; });
  if (it == syms_.begin()) return "";
  const Sym& s = *std::prev(it);
  const uint64_t off = addr - s.addr;
  if (off >= 65536 || (it != syms_.end() && addr >= it->addr)) return "";
  if (!off) return s.name;
  char buf[32];
  snprintf(buf, sizeof buf, "+0x%llx", static_cast<unsigned long long>(off));
  return s.name + buf;
}

std::string lock_class(uint32_t f) {
  if (f & JB_LCB_PERCPU) return "percpu_rwsem";
  if (f & JB_LCB_RT) return "rtmutex";
  if (f & JB_LCB_MUTEX) return "mutex";
  if (f & JB_LCB_SPIN) return f & (JB_LCB_READ | JB_LCB_WRITE) ? "rwlock" : "spinlock";
  if (f & (JB_LCB_READ | JB_LCB_WRITE)) return "rwsem";
  return "semaphore";  // down(): the kernel traces it with no flags
}

std::string lock_mode(uint32_t f) {
  if (f & JB_LCB_READ) return "read";
  if (f & JB_LCB_WRITE) return "write";
  return "";
}

ProcIdentities::ProcIdentities() = default;
ProcIdentities::~ProcIdentities() = default;

std::string ProcIdentities::kernel_text(uint64_t addr) {
  if (!kallsyms_of_ || !addr) return "";
  auto hit = kallsyms_of_(kallsyms_ctx_).lookup(addr);
  char buf[32];
  if (!hit) {
    snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(addr));
    return buf;
  }
  snprintf(buf, sizeof buf, "+0x%llx", static_cast<unsigned long long>(hit->offset));
  std::string s = safe_name(std::string(hit->name), 128) + buf;
  if (!hit->module.empty()) s += " [" + safe_name(std::string(hit->module), 64) + "]";
  return s;
}

std::string ProcIdentities::kernel_object(uint64_t addr) {
  if (!addr) return "";
  if (!objects_) objects_ = std::make_unique<KernelObjects>(KernelObjects::load());
  return objects_->name_of(addr);
}

}  // namespace jankbpf::cause
