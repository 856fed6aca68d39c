#include "runtime/v8_frames.h"

#include <algorithm>
#include <cstring>

#include "util/clock.h"

namespace jankbpf::runtime {
namespace {

template <typename T>
T at(const uint8_t* buf, size_t size, size_t off) {
  T v{};
  if (off + sizeof v <= size) std::memcpy(&v, buf + off, sizeof v);
  return v;
}

// A tagged V8 Smi (no pointer compression): the value is the upper half.
int64_t smi_value(uint64_t raw) { return static_cast<int64_t>(raw) >> 32; }

// Return addresses as the unwinder reports them: arm64 pointer
// authentication bits above a 48-bit user address are not part of it.
constexpr uint64_t kUserAddrMask = (uint64_t{1} << 48) - 1;

}  // namespace

bool V8Walker::instance_type(MemReader& mem, uint64_t tagged, uint16_t* type) {
  if ((tagged & l_.heap_tag_mask) != l_.heap_tag) return false;
  uint64_t map = 0;
  if (!mem.read_value(tagged - l_.heap_tag + l_.obj_map, &map)) return false;
  if ((map & l_.heap_tag_mask) != l_.heap_tag) return false;
  return mem.read_value(map - l_.heap_tag + l_.map_instance_type, type);
}

bool V8Walker::is_sfi_map(MemReader& mem, uint64_t map) {
  if (sfi_map_) return map == sfi_map_;
  if ((map & l_.heap_tag_mask) != l_.heap_tag) return false;
  uint16_t type = 0;
  if (!mem.read_value(map - l_.heap_tag + l_.map_instance_type, &type) || type != l_.type_sfi) return false;
  sfi_map_ = map;
  return true;
}

// Sequential, cons, sliced and thin strings, one- and two-byte (two-byte
// kept to one char per code unit, non-ASCII as '?': names and paths, and
// source whose offsets must stay those of V8), at most `max` chars.
bool V8Walker::read_string(MemReader& mem, uint64_t tagged, std::string& out, size_t max, int depth) {
  if (depth > 8 || out.size() >= max) return depth > 0;
  uint16_t type = 0;
  if (!instance_type(mem, tagged, &type) || type >= l_.first_nonstring) return false;
  const uint64_t obj = tagged - l_.heap_tag;
  int32_t length = 0;
  if (!mem.read_value(obj + l_.str_length, &length) || length < 0) return false;
  const uint16_t repr = type & l_.string_repr_mask;
  const bool one_byte = (type & l_.string_enc_mask) == l_.one_byte_tag;
  if (repr == l_.seq_tag) {
    size_t n = std::min<size_t>(static_cast<size_t>(length), max - out.size());
    size_t at_start = out.size();
    out.resize(at_start + (one_byte ? n : 2 * n));
    if (n && !mem.read(obj + l_.seq_chars, out.data() + at_start, out.size() - at_start)) {
      out.resize(at_start);
      return false;
    }
    if (!one_byte) {  // in place: char i from the code unit at 2i
      for (size_t i = 0; i < n; ++i) {
        uint16_t ch;
        std::memcpy(&ch, out.data() + at_start + 2 * i, 2);
        out[at_start + i] = ch < 0x80 ? static_cast<char>(ch) : '?';
      }
      out.resize(at_start + n);
    }
    return true;
  }
  if (repr == l_.thin_tag) {
    uint64_t actual = 0;
    return mem.read_value(obj + l_.thin_actual, &actual) && read_string(mem, actual, out, max, depth + 1);
  }
  if (repr == l_.cons_tag) {
    uint64_t first = 0, second = 0;
    if (!mem.read_value(obj + l_.cons_first, &first) || !mem.read_value(obj + l_.cons_second, &second)) return false;
    return read_string(mem, first, out, max, depth + 1) && read_string(mem, second, out, max, depth + 1);
  }
  if (repr == l_.sliced_tag) {
    uint64_t parent = 0, offset = 0;
    if (!mem.read_value(obj + l_.sliced_parent, &parent) || !mem.read_value(obj + l_.sliced_offset, &offset))
      return false;
    auto from = static_cast<size_t>(std::max<int64_t>(0, smi_value(offset)));
    std::string whole;
    if (from >= max || !read_string(mem, parent, whole, std::min(max, from + static_cast<size_t>(length)), depth + 1))
      return false;
    if (from < whole.size()) out += whole.substr(from, std::min(static_cast<size_t>(length), max - out.size()));
    return true;
  }
  return false;  // external strings: their bytes are the embedder's, not followed
}

// A compiled function's ScopeInfo, past its context locals' names and
// infos: the function variable (name, slot), the inferred name, then the
// position info (start, end: two Smis). Which of these are present
// depends on flags whose bits are not exported, so they are recognized by
// kind: the first non-empty string is the name, the first two Smis
// 0 <= start < end the position.
void V8Walker::scope_info(MemReader& mem, uint64_t scope_info, std::string& name, int64_t& start) {
  constexpr size_t kSlots = 8;
  const uint64_t obj = scope_info - l_.heap_tag;
  uint64_t nlocals_raw = 0;  // slot k is the tagged word after the map at index k
  if (!mem.read_value(obj + 8 + 8 * uint64_t{l_.scope_ncontextlocals}, &nlocals_raw)) return;
  int64_t n = smi_value(nlocals_raw);
  if ((nlocals_raw & l_.smi_tag_mask) != 0 || n < 0 || n > 1 << 16) return;
  // Up to 75 names inline, past that one hash table (V8's
  // kScopeInfoMaxInlinedLocalNamesSize).
  uint64_t after = uint64_t{l_.scope_first_vars} + (n < 75 ? static_cast<uint64_t>(n) : 1) + static_cast<uint64_t>(n);
  uint64_t slots[kSlots] = {};
  if (!mem.read(obj + 8 + 8 * after, slots, sizeof slots)) return;
  for (size_t i = 0; i < kSlots; ++i) {
    uint64_t v = slots[i];
    if ((v & l_.smi_tag_mask) == 0) {
      if (i + 1 < kSlots && (slots[i + 1] & l_.smi_tag_mask) == 0) {
        int64_t a = smi_value(v), b = smi_value(slots[i + 1]);
        if (a >= 0 && a < b) {
          start = a;
          return;
        }
      }
      continue;
    }
    uint16_t type = 0;
    if (!name.empty() || !instance_type(mem, v, &type) || type >= l_.first_nonstring) continue;
    std::string s;
    if (read_string(mem, v, s, kMaxJsStringBytes)) name = std::move(s);  // never a part
  }
}

const V8Walker::Script* V8Walker::script(MemReader& mem, uint64_t script) {
  uint64_t name = 0, source = 0;
  if (!mem.read_value(script - l_.heap_tag + l_.script_name, &name) ||
      !mem.read_value(script - l_.heap_tag + l_.script_source, &source))
    return nullptr;
  auto it = script_cache_.find(script);
  if (it != script_cache_.end() && it->second.name_obj == name && it->second.source_obj == source) return &it->second;
  if (walk_source_bytes_ + kMaxJsSourceBytes > kMaxJsSourcePerWalk) {
    budget_cut_ = true;  // this walk has read its share of sources
    return nullptr;
  }
  Script sc{name, source, {}, {}, false};
  if (!read_string(mem, name, sc.name, kMaxJsStringBytes)) sc.name.clear();  // undefined: eval'd, internal
  // Line starts from the source, once per script (external sources, such
  // as Node's own modules, are not read: their lines stay unknown).
  std::string text;
  const bool read = read_string(mem, source, text, kMaxJsSourceBytes);
  walk_source_bytes_ += text.size();
  if (read) {
    sc.lines = true;
    sc.line_starts.push_back(0);
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n') sc.line_starts.push_back(static_cast<uint32_t>(i + 1));
  }
  if (sc.line_starts.size() > kMaxLineStarts) {  // a pathological source: no lines rather than 16 MB
    sc.line_starts = {};
    sc.lines = false;
  }
  // Bounded by entries and by line starts held (a bundle of many large
  // scripts must not grow a process's cache without end).
  if (script_cache_.size() >= kMaxCachedScripts || line_starts_held_ + sc.line_starts.size() > kMaxLineStarts) {
    script_cache_.clear();
    line_starts_held_ = 0;
  }
  line_starts_held_ += sc.line_starts.size();
  auto& slot = script_cache_[script];
  line_starts_held_ -= slot.line_starts.size();  // an entry replaced (the script's name or source moved)
  return &(slot = std::move(sc));
}

const V8Walker::Sfi* V8Walker::decode(MemReader& mem, uint64_t sfi, uint64_t name_or_scope, uint64_t script_ptr) {
  auto it = sfi_cache_.find(sfi);
  if (it != sfi_cache_.end() && it->second.name_or_scope == name_or_scope && it->second.script == script_ptr)
    return &it->second;
  Sfi d{name_or_scope, script_ptr, {}, {}, 0, 0};
  int64_t start = -1;
  uint16_t type = 0;
  if (instance_type(mem, name_or_scope, &type)) {
    if (type < l_.first_nonstring) {
      if (!read_string(mem, name_or_scope, d.name, kMaxJsStringBytes)) return nullptr;
    } else if (type == l_.type_scope_info) {
      scope_info(mem, name_or_scope, d.name, start);
    }
  }
  if (instance_type(mem, script_ptr, &type) && type == l_.type_script) {
    const bool was_cut = budget_cut_;
    budget_cut_ = false;
    const Script* sc = script(mem, script_ptr);
    const bool skipped = budget_cut_;
    budget_cut_ |= was_cut;
    if (skipped) {  // named now, its line and file by a later walk: not cached
      sfi_scratch_ = std::move(d);
      return &sfi_scratch_;
    }
    if (!sc) return nullptr;
    d.file = sc->name;
    if (sc->lines && start >= 0) {
      auto next = std::upper_bound(sc->line_starts.begin(), sc->line_starts.end(), static_cast<uint64_t>(start));
      auto line = static_cast<size_t>(next - sc->line_starts.begin());  // 1-based
      if (line >= 1 && static_cast<uint64_t>(start) < kMaxJsSourceBytes) {
        d.line = static_cast<uint32_t>(line);
        d.column = static_cast<uint32_t>(static_cast<uint64_t>(start) - sc->line_starts[line - 1] + 1);
      }
    }
  }
  if (sfi_cache_.size() >= kMaxCachedFunctions) sfi_cache_.clear();
  return &(sfi_cache_[sfi] = std::move(d));
}

namespace {

// The copied stack, read by address.
struct StackCopy {
  const NativeStack& s;
  bool word(uint64_t addr, uint64_t* out) const {
    if (addr < s.sp || addr + 8 > s.sp + s.stack.size() || addr + 8 < addr) return false;
    std::memcpy(out, s.stack.data() + (addr - s.sp), 8);
    return true;
  }
};

}  // namespace

// The frame-pointer chain in the copy from `fp`: frames whose context slot
// holds a heap object (a typed frame has a Smi there) and whose function
// slot a tagged pointer are candidates.
std::vector<V8Walker::Candidate> V8Walker::chain(const NativeStack& s, uint64_t fp) const {
  StackCopy copy{s};
  std::vector<Candidate> cands;
  for (size_t links = 0; links < kMaxFpLinks && cands.size() < kMaxJsFrames; ++links) {
    uint64_t saved = 0, ret = 0, ctx = 0, fn = 0;
    if ((fp & 7) || !copy.word(fp, &saved) || !copy.word(fp + 8, &ret)) break;
    if (looks_like_js(s, fp, &ctx, &fn)) cands.push_back({fn, ret & kUserAddrMask, {}, {}});
    if (saved <= fp) break;
    fp = saved;
  }
  return cands;
}

bool V8Walker::looks_like_js(const NativeStack& s, uint64_t fp, uint64_t* ctx, uint64_t* fn) const {
  StackCopy copy{s};
  return copy.word(fp + static_cast<uint64_t>(l_.fp_context_or_type), ctx) &&
         copy.word(fp + static_cast<uint64_t>(l_.fp_function), fn) && (*ctx & l_.heap_tag_mask) == l_.heap_tag &&
         (*fn & l_.heap_tag_mask) == l_.heap_tag;
}

// Candidates whose function's shared info is one (its map is the
// SharedFunctionInfo map) become JS frames, named from the cache or read:
// the JSFunctions, then their SharedFunctionInfos, two system calls for
// the whole stack.
std::vector<JsFrame> V8Walker::frames(MemReader& mem, std::vector<Candidate>& cands) {
  std::vector<JsFrame> out;
  if (cands.empty()) return out;
  std::vector<MemReader::Op> ops;
  ops.reserve(cands.size());
  for (auto& k : cands) ops.push_back({k.function - l_.heap_tag, k.fn, sizeof k.fn});
  mem.read_batch(ops);
  std::vector<size_t> live;
  std::vector<MemReader::Op> sfi_ops;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!ops[i].ok) continue;
    uint64_t sfi = at<uint64_t>(cands[i].fn, sizeof cands[i].fn, l_.fn_shared);
    if ((sfi & l_.heap_tag_mask) != l_.heap_tag) continue;
    live.push_back(i);
    sfi_ops.push_back({sfi - l_.heap_tag, cands[i].sfi, sizeof cands[i].sfi});
  }
  mem.read_batch(sfi_ops);
  for (size_t j = 0; j < live.size(); ++j) {
    Candidate& k = cands[live[j]];
    if (!sfi_ops[j].ok) continue;
    uint64_t map = at<uint64_t>(k.sfi, sizeof k.sfi, l_.obj_map);
    if (!is_sfi_map(mem, map)) continue;
    uint64_t sfi = sfi_ops[j].addr + l_.heap_tag;
    uint64_t name_or_scope = at<uint64_t>(k.sfi, sizeof k.sfi, l_.sfi_name_or_scope);
    uint64_t script = at<uint64_t>(k.sfi, sizeof k.sfi, l_.sfi_script);
    JsFrame f;
    f.caller_pc = k.caller_pc;
    if (const Sfi* d = decode(mem, sfi, name_or_scope, script)) {
      f.name = d->name;
      f.file = d->file;
      f.line = d->line;
      f.column = d->column;
    } else {
      f.unreadable = true;
    }
    out.push_back(std::move(f));
  }
  return out;
}

JsCapture V8Walker::walk(MemReader& mem, const NativeStack& s) {
  JsCapture c;
  c.status = JsCapture::Status::Ok;
  walk_source_bytes_ = 0;
  budget_cut_ = false;
  StackCopy copy{s};
  uint64_t saved = 0;
  if (!(s.fp & 7) && copy.word(s.fp, &saved)) {
    auto cands = chain(s, s.fp);
    c.frames = frames(mem, cands);
  }
  if (c.frames.empty()) {
    // A leaf that uses the frame pointer register for data (hand-written
    // assembly: OpenSSL's SHA-2 keeps a table address there) leaves no
    // chain at it, or one through its own data. The chain is then picked up where a stack word starts
    // one that looks like a JS frame's (its context and function slots
    // tagged, kMinLinks links each higher): a few tries, each believed
    // only if a JS function's objects check out.
    constexpr int kMinLinks = 2, kTries = 3;
    int tries = 0;
    for (uint64_t a = s.sp; a < s.sp + std::min<uint64_t>(s.stack.size(), kMaxScanBytes) && tries < kTries;
         a += 8) {
      uint64_t ctx = 0, fn = 0, f = a, next = 0;
      if (!looks_like_js(s, a, &ctx, &fn)) continue;
      int links = 0;
      while (links < kMinLinks && copy.word(f, &next) && next > f && !(next & 7)) f = next, ++links;
      if (links < kMinLinks) continue;
      ++tries;
      auto cands = chain(s, a);
      c.frames = frames(mem, cands);
      if (!c.frames.empty()) {
        c.scanned = true;
        break;
      }
    }
  }
  c.read_ns = monotonic_ns();
  c.budget_cut = budget_cut_;
  return c;
}

}  // namespace jankbpf::runtime
