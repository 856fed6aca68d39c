#include "bpf/kernel_funcs.h"

#include <bpf/btf.h>
#include <fcntl.h>
#include <linux/btf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/fd.h"

namespace jankbpf {
namespace {

constexpr const char* kVmlinux = "/sys/kernel/btf/vmlinux";
constexpr size_t kMaxBtf = 256u << 20;  // a kernel's BTF is ~5 MB; a bound, not an estimate

// Bytes after a btf_type for each kind, or -1 for a kind this does not know
// (a newer kernel's): the walk cannot go past it.
long extra_bytes(uint32_t kind, uint32_t vlen) {
  switch (kind) {
    case BTF_KIND_INT: return 4;
    case BTF_KIND_PTR: case BTF_KIND_FWD: case BTF_KIND_TYPEDEF: case BTF_KIND_VOLATILE:
    case BTF_KIND_CONST: case BTF_KIND_RESTRICT: case BTF_KIND_FUNC: case BTF_KIND_FLOAT:
    case 18 /* BTF_KIND_TYPE_TAG */: return 0;
    case BTF_KIND_ARRAY: return 12;
    case BTF_KIND_STRUCT: case BTF_KIND_UNION: return 12L * vlen;
    case BTF_KIND_ENUM: return 8L * vlen;
    case BTF_KIND_FUNC_PROTO: return 8L * vlen;
    case BTF_KIND_VAR: return 4;
    case BTF_KIND_DATASEC: return 12L * vlen;
    case 17 /* BTF_KIND_DECL_TAG */: return 4;
    case 19 /* BTF_KIND_ENUM64 */: return 12L * vlen;
    default: return -1;
  }
}

bool read_all(const char* path, std::vector<uint8_t>& out, std::string* error) {
  Fd fd(::open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    *error = std::string(path) + ": " + strerror(errno);
    return false;
  }
  out.resize(8u << 20);
  size_t have = 0;
  for (;;) {
    if (have == out.size()) {
      if (out.size() >= kMaxBtf) {
        *error = std::string(path) + ": larger than " + std::to_string(kMaxBtf >> 20) + " MB";
        return false;
      }
      out.resize(out.size() * 2);
    }
    ssize_t n = ::read(fd.get(), out.data() + have, out.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = std::string(path) + ": " + strerror(errno);
      return false;
    }
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  out.resize(have);
  return true;
}

template <typename T>
T load_at(const uint8_t* data, size_t off) {
  T v;
  memcpy(&v, data + off, sizeof v);
  return v;
}

}  // namespace

KernelFuncs KernelFuncs::from_raw(std::vector<uint8_t> raw) {
  KernelFuncs k;
  k.raw_ = std::move(raw);
  k.index(k.raw_.data(), k.raw_.size());
  return k;
}

void KernelFuncs::index(const uint8_t* b, size_t size) {
  if (size < sizeof(btf_header)) {
    error_ = "BTF shorter than its header";
    return;
  }
  auto h = load_at<btf_header>(b, 0);
  if (h.magic != BTF_MAGIC) {
    error_ = "not BTF of this machine's byte order (magic " + std::to_string(h.magic) + ")";
    return;
  }
  // Sections are offsets past the header; each must lie inside the blob.
  const uint64_t base = h.hdr_len;
  auto inside = [&](uint64_t off, uint64_t len) { return base + off + len <= size; };
  if (h.hdr_len < sizeof(btf_header) || !inside(h.type_off, h.type_len) || !inside(h.str_off, h.str_len)) {
    error_ = "BTF header's sections lie outside its " + std::to_string(size) + " bytes";
    return;
  }
  const size_t types = base + h.type_off, types_end = types + h.type_len;
  const size_t strs = base + h.str_off, strs_end = strs + h.str_len;
  uint32_t id = 1;  // 0 is void
  for (size_t off = types; off < types_end; id++) {
    if (types_end - off < sizeof(btf_type)) {
      error_ = "BTF type " + std::to_string(id) + " cut short";
      break;
    }
    auto t = load_at<btf_type>(b, off);
    const uint32_t kind = BTF_INFO_KIND(t.info), vlen = BTF_INFO_VLEN(t.info);
    const long extra = extra_bytes(kind, vlen);
    if (extra < 0) {
      error_ = "BTF type " + std::to_string(id) + " of unknown kind " + std::to_string(kind);
      break;
    }
    off += sizeof(btf_type);
    if (static_cast<size_t>(extra) > types_end - off) {
      error_ = "BTF type " + std::to_string(id) + " cut short";
      break;
    }
    off += static_cast<size_t>(extra);
    if (kind != BTF_KIND_FUNC || t.name_off == 0) continue;
    if (t.name_off >= h.str_len) continue;  // a name outside the strings: not one we can match
    const char* name = reinterpret_cast<const char*>(b + strs + t.name_off);
    const size_t len = strnlen(name, strs_end - (strs + t.name_off));
    if (strs + t.name_off + len == strs_end) continue;  // unterminated
    funcs_.push_back({std::string_view(name, len), id});
  }
  if (!error_.empty()) funcs_.clear();
}

KernelFuncs KernelFuncs::load() {
  std::vector<uint8_t> raw;
  std::string error;
  // Linux 6.16+ maps it read-only (MAP_PRIVATE): no copy, where read()
  // hands it out 4 KB a call and a fresh 5 MB copy faults in every page.
  {
    Fd fd(::open(kVmlinux, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    struct stat st;
    if (fd && !fstat(fd.get(), &st) && st.st_size > 0 && static_cast<uint64_t>(st.st_size) <= kMaxBtf) {
      void* m = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
      if (m != MAP_FAILED) {
        KernelFuncs k;
        k.map_ = m;
        k.map_size_ = static_cast<size_t>(st.st_size);
        k.index(static_cast<const uint8_t*>(m), k.map_size_);
        return k;
      }
    }
  }
  if (read_all(kVmlinux, raw, &error)) return from_raw(std::move(raw));
  // No /sys/kernel/btf/vmlinux: libbpf looks for a vmlinux ELF with BTF.
  KernelFuncs k;
  btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) {
    k.error_ = error + "; no vmlinux BTF elsewhere either";
    return k;
  }
  // Names copied into one block first, viewed after (no reallocation then).
  std::vector<std::pair<size_t, uint32_t>> at;
  const uint32_t n = btf__type_cnt(vmlinux);
  for (uint32_t i = 1; i < n; i++) {
    const btf_type* t = btf__type_by_id(vmlinux, i);
    if (!t || BTF_INFO_KIND(t->info) != BTF_KIND_FUNC) continue;
    const char* name = btf__name_by_offset(vmlinux, t->name_off);
    if (!name || !*name) continue;
    at.emplace_back(k.raw_.size(), i);
    k.raw_.insert(k.raw_.end(), name, name + strlen(name) + 1);
  }
  btf__free(vmlinux);
  for (auto [off, id] : at)
    k.funcs_.push_back({std::string_view(reinterpret_cast<const char*>(k.raw_.data() + off)), id});
  return k;
}

KernelFuncs::~KernelFuncs() { unmap(); }

void KernelFuncs::unmap() {
  if (map_) munmap(map_, map_size_);
  map_ = nullptr;
  map_size_ = 0;
}

KernelFuncs::KernelFuncs(KernelFuncs&& o) noexcept { *this = std::move(o); }

KernelFuncs& KernelFuncs::operator=(KernelFuncs&& o) noexcept {
  if (this == &o) return *this;
  unmap();
  raw_ = std::move(o.raw_);
  funcs_ = std::move(o.funcs_);
  error_ = std::move(o.error_);
  map_ = o.map_;
  map_size_ = o.map_size_;
  o.map_ = nullptr;
  o.map_size_ = 0;
  return *this;
}

uint32_t KernelFuncs::id(std::string_view name) const {
  for (const Func& f : funcs_)
    if (f.name.size() == name.size() && f.name == name) return f.id;
  return 0;
}

}  // namespace jankbpf
