#include "runtime/python_frames.h"

#include <algorithm>
#include <cstring>

namespace jankbpf::runtime {
namespace {

constexpr size_t kMaxCodeCache = 8192;
constexpr size_t kMaxInterpreters = 16;

template <typename T>
T field(const std::vector<uint8_t>& buf, uint32_t off) {
  T v{};
  if (off != kNoField && off + sizeof v <= buf.size()) std::memcpy(&v, buf.data() + off, sizeof v);
  return v;
}

// Location-table varints: 6 bits a byte, bit 6 says more follow.
bool read_varint(std::span<const uint8_t> t, size_t& i, uint64_t& out) {
  out = 0;
  for (unsigned shift = 0; i < t.size() && shift < 64; shift += 6) {
    uint8_t b = t[i++];
    out |= uint64_t(b & 63) << shift;
    if (!(b & 64)) return true;
  }
  return false;
}

bool read_svarint(std::span<const uint8_t> t, size_t& i, int64_t& out) {
  uint64_t u;
  if (!read_varint(t, i, u)) return false;
  out = (u & 1) ? -int64_t(u >> 1) : int64_t(u >> 1);
  return true;
}

void append_utf8(std::string& s, uint32_t c) {
  if (c < 0x80) {
    s += char(c);
  } else if (c < 0x800) {
    s += char(0xc0 | (c >> 6));
    s += char(0x80 | (c & 63));
  } else if (c < 0x10000) {
    s += char(0xe0 | (c >> 12));
    s += char(0x80 | ((c >> 6) & 63));
    s += char(0x80 | (c & 63));
  } else {
    s += char(0xf0 | (c >> 18));
    s += char(0x80 | ((c >> 12) & 63));
    s += char(0x80 | ((c >> 6) & 63));
    s += char(0x80 | (c & 63));
  }
}

}  // namespace

uint32_t python_line(std::span<const uint8_t> t, int32_t firstlineno, int64_t unit) {
  if (unit < 0) unit = 0;  // before the first instruction (a frame being set up)
  int64_t line = firstlineno, start = 0;
  size_t i = 0;
  while (i < t.size()) {
    uint8_t b = t[i++];
    if (!(b & 0x80)) return 0;  // not an entry's first byte: a damaged table
    int code = (b >> 3) & 15;
    int64_t len = (b & 7) + 1, delta = 0;
    uint64_t skip;
    switch (code) {
      case 15: break;  // no location
      case 14:         // long form: line delta, end line, column, end column
        if (!read_svarint(t, i, delta) || !read_varint(t, i, skip) || !read_varint(t, i, skip) ||
            !read_varint(t, i, skip))
          return 0;
        break;
      case 13:  // no columns
        if (!read_svarint(t, i, delta)) return 0;
        break;
      case 10: case 11: case 12:  // one line, two column bytes
        delta = code - 10;
        i += 2;
        break;
      default:  // short form: same line, one column byte
        i += 1;
        break;
    }
    if (__builtin_add_overflow(line, delta, &line)) return 0;  // a hostile table's huge delta
    if (unit < start + len) return code == 15 || line <= 0 || line > UINT32_MAX ? 0 : uint32_t(line);
    start += len;
  }
  return 0;
}

bool PythonWalker::read_string(MemReader& mem, uint64_t addr, std::string& out) {
  const PythonLayout& l = *t_.layout;
  std::vector<uint8_t> hdr(l.ascii_size);
  if (!addr || !mem.read(addr, hdr.data(), hdr.size())) return false;
  if (t_.unicode_type && field<uint64_t>(hdr, kObType) != t_.unicode_type) return false;
  int64_t length = field<int64_t>(hdr, l.unicode_length);
  uint32_t state = field<uint32_t>(hdr, l.unicode_state);
  unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  if (!compact || length < 0 || (kind != 1 && kind != 2 && kind != 4)) return false;
  if (ascii && kind != 1) return false;
  size_t n = static_cast<size_t>(std::min<int64_t>(length, kMaxPyStringBytes));
  std::vector<uint8_t> data(n * kind);
  if (!data.empty() && !mem.read(addr + (ascii ? l.ascii_size : l.compact_size), data.data(), data.size()))
    return false;
  out.clear();
  for (size_t k = 0; k < n; ++k) {
    uint32_t c = 0;
    std::memcpy(&c, data.data() + k * kind, kind);  // little-endian hosts (x86_64, aarch64)
    if (c > 0x10ffff || (ascii && c > 0x7f)) return false;
    append_utf8(out, c);
  }
  if (static_cast<size_t>(length) > n) out += "...";
  return true;
}

void PythonWalker::clear_caches() {
  code_cache_.clear();
  tables_.clear();
  held_ = 0;
}

std::shared_ptr<const std::vector<uint8_t>> PythonWalker::table(MemReader& mem, uint64_t addr, bool* over_budget) {
  const PythonLayout& l = *t_.layout;
  if (!addr) return nullptr;
  // The bytes object's header says its size: a table shared by many code
  // objects is read once (a freed one whose address now holds another of
  // the same size is the one risk, and it costs a line number).
  std::vector<uint8_t> hdr(l.bytes_data);
  if (!mem.read(addr, hdr.data(), hdr.size())) return nullptr;
  if (t_.bytes_type && field<uint64_t>(hdr, kObType) != t_.bytes_type) return nullptr;
  int64_t size = field<int64_t>(hdr, l.bytes_size);
  if (size < 0) return nullptr;
  const size_t n = static_cast<size_t>(std::min<int64_t>(size, kMaxPyLineTable));
  if (auto it = tables_.find(addr); it != tables_.end()) {
    if (it->second->size() == n) return it->second;
    held_ -= std::min(held_, it->second->size());
    tables_.erase(it);
  }
  if (walk_table_bytes_ + n > kMaxPyLineBytesPerWalk) {
    *over_budget = true;
    return nullptr;
  }
  walk_table_bytes_ += n;
  // A longer table is kept up to the cap: lines past it read as unknown.
  auto out = std::make_shared<std::vector<uint8_t>>(n);
  if (n && !mem.read(addr + l.bytes_data, out->data(), n)) return nullptr;
  if (tables_.size() >= kMaxCodeCache) {
    for (const auto& [a, t] : tables_) held_ -= std::min(held_, t->size());
    tables_.clear();
  }
  held_ += n;
  return tables_.emplace(addr, std::move(out)).first->second;
}

const PythonWalker::Code* PythonWalker::code(MemReader& mem, uint64_t addr, const std::vector<uint8_t>& hdr) {
  const PythonLayout& l = *t_.layout;
  if (t_.code_type && field<uint64_t>(hdr, kObType) != t_.code_type) return nullptr;
  Code c;
  c.name_ptr = field<uint64_t>(hdr, l.code_name);
  c.qualname_ptr = field<uint64_t>(hdr, l.code_qualname);
  c.file_ptr = field<uint64_t>(hdr, l.code_filename);
  c.linetable_ptr = field<uint64_t>(hdr, l.code_linetable);
  c.firstlineno = field<int32_t>(hdr, l.code_firstlineno);
  auto it = code_cache_.find(addr);
  if (it != code_cache_.end()) {
    Code& k = it->second;
    if (k.name_ptr == c.name_ptr && k.qualname_ptr == c.qualname_ptr && k.file_ptr == c.file_ptr &&
        k.linetable_ptr == c.linetable_ptr && k.firstlineno == c.firstlineno) {
      if (k.table_pending) {
        bool over = false;
        k.linetable = table(mem, k.linetable_ptr, &over);
        k.table_pending = over;
        if (over) budget_cut_ = true;
      }
      return &k;
    }
    held_ -= std::min(held_, it->second.name.size() + it->second.file.size() + sizeof(Code));
    code_cache_.erase(it);  // another code object now lives there
  }
  if (!read_string(mem, c.qualname_ptr, c.name) && !read_string(mem, c.name_ptr, c.name)) return nullptr;
  if (!read_string(mem, c.file_ptr, c.file)) return nullptr;
  bool over = false;
  c.linetable = table(mem, c.linetable_ptr, &over);  // null: name without a line
  c.table_pending = over;
  if (over) budget_cut_ = true;
  // Bounded by entries and by bytes (tables counted once, in table()).
  if (code_cache_.size() >= kMaxCodeCache || held_ > kMaxPyCacheBytes) {
    if (held_ > kMaxPyCacheBytes) budget_cut_ = true;
    // Keep the table being used: it is referenced by c.
    clear_caches();
    if (c.linetable) {
      held_ += c.linetable->size();
      tables_.emplace(c.linetable_ptr, c.linetable);
    }
  }
  held_ += c.name.size() + c.file.size() + sizeof(Code);
  return &code_cache_.emplace(addr, std::move(c)).first->second;
}

uint64_t PythonWalker::find_thread(MemReader& mem, uint64_t native_tid, std::vector<uint8_t>& ts) {
  const PythonLayout& l = *t_.layout;
  ts.resize(l.tstate_size);
  auto it = thread_cache_.find(native_tid);
  if (it != thread_cache_.end()) {
    if (mem.read(it->second, ts.data(), ts.size()) && field<uint64_t>(ts, l.tstate_native_thread_id) == native_tid)
      return it->second;
    thread_cache_.erase(it);
  }
  uint64_t interp = 0;
  if (!mem.read_value(t_.runtime + l.runtime_interp_head, &interp)) return 0;
  size_t threads = 0;
  for (size_t n = 0; interp && n < kMaxInterpreters; ++n) {
    uint64_t tstate = 0;
    if (!mem.read_value(interp + l.interp_threads_head, &tstate)) return 0;
    while (tstate && threads++ < kMaxPyThreads) {
      if (!mem.read(tstate, ts.data(), ts.size())) break;
      if (field<uint64_t>(ts, l.tstate_native_thread_id) == native_tid) {
        if (thread_cache_.size() >= kMaxPyThreads) thread_cache_.clear();
        thread_cache_[native_tid] = tstate;
        return tstate;
      }
      tstate = field<uint64_t>(ts, l.tstate_next);
    }
    if (!mem.read_value(interp + l.interp_next, &interp)) break;
  }
  return 0;
}

PyCapture PythonWalker::walk(MemReader& mem, uint64_t native_tid) {
  PyCapture out;
  if (!t_.layout) return out;
  walk_table_bytes_ = 0;
  budget_cut_ = false;
  const PythonLayout& l = *t_.layout;
  std::vector<uint8_t> ts;
  uint64_t tstate = find_thread(mem, native_tid, ts);
  if (!tstate) {
    uint64_t probe;
    out.status = mem.read_value(t_.runtime, &probe) ? PyCapture::Status::NoThread : PyCapture::Status::Unreadable;
    return out;
  }
  uint64_t frame = 0;
  if (l.tstate_cframe != kNoField) {
    uint64_t cframe = field<uint64_t>(ts, l.tstate_cframe);
    if (cframe && !mem.read_value(cframe + l.cframe_current_frame, &frame)) {
      out.status = PyCapture::Status::Unreadable;
      return out;
    }
  } else {
    frame = field<uint64_t>(ts, l.cframe_current_frame);
  }
  out.status = PyCapture::Status::Ok;
  // 1. The chain: one read a frame (each names the next).
  struct Raw {
    uint64_t code, prev_instr;
    bool entry;
  };
  std::vector<Raw> raw;
  std::vector<uint8_t> fb(l.frame_size);
  bool cut = false;
  for (size_t n = 0; frame; ++n) {
    if (n >= kMaxPyFrames) {
      out.truncated = true;
      break;
    }
    if (!mem.read(frame, fb.data(), fb.size())) {
      cut = true;  // the chain cannot be followed past it
      break;
    }
    frame = field<uint64_t>(fb, l.frame_previous);
    if (l.entry == EntryRule::ShimFrame && field<uint8_t>(fb, l.frame_owner) == l.owner_cstack) {
      if (!raw.empty()) raw.back().entry = true;
      continue;
    }
    bool entry = l.entry == EntryRule::IsEntryFlag && field<uint8_t>(fb, l.frame_is_entry) != 0;
    raw.push_back({field<uint64_t>(fb, l.frame_code), field<uint64_t>(fb, l.frame_prev_instr), entry});
  }
  // 2. Every frame's code object header in one batch: most are cached, and
  // the header is what tells whether the cached names still hold.
  std::vector<std::vector<uint8_t>> hdrs(raw.size(), std::vector<uint8_t>(l.code_adaptive));
  std::vector<MemReader::Op> ops;
  for (size_t i = 0; i < raw.size(); ++i) ops.push_back({raw[i].code, hdrs[i].data(), hdrs[i].size()});
  mem.read_batch(ops);
  for (size_t i = 0; i < raw.size(); ++i) {
    PyFrame f;
    f.entry = raw[i].entry;
    const Code* c = raw[i].code && ops[i].ok ? code(mem, raw[i].code, hdrs[i]) : nullptr;
    if (c) {
      f.name = c->name;
      f.file = c->file;
      uint64_t first_unit = raw[i].code + l.code_adaptive;
      int64_t unit = static_cast<int64_t>(raw[i].prev_instr - first_unit) / 2;  // _Py_CODEUNIT is 2 bytes
      if (c->linetable) f.line = python_line(*c->linetable, c->firstlineno, unit);
    } else {
      f.unreadable = true;
    }
    out.frames.push_back(std::move(f));
  }
  if (cut) {
    out.frames.push_back({.unreadable = true});
    out.cut = true;
  }
  out.budget_cut = budget_cut_;
  return out;
}

}  // namespace jankbpf::runtime
