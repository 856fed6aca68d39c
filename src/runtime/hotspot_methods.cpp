// Naming the frames a walk found (hotspot_frames.h): each Method* decoded
// once -- its ConstMethod, constant pool, name and holder's symbols, source
// file, line number table -- cached, and re-checked each sample.
#include <algorithm>
#include <unordered_map>

#include "runtime/hotspot_walk.h"

namespace jankbpf::runtime {

using hotspot_detail::get;

bool HotSpotWalker::read_symbol(MemReader& mem, uint64_t sym, std::string& out) {
  sym &= ~uint64_t{1};  // a constant pool slot's tag bit
  if (!sym) return false;
  std::array<uint8_t, 72> head{};
  size_t body = l_.symbol_body;
  if (body + 1 > head.size()) return false;
  if (!mem.read(sym, head.data(), head.size()) && !mem.read(sym, head.data(), body + 8)) return false;
  uint16_t len = 0;
  std::memcpy(&len, head.data() + l_.symbol_length, sizeof len);
  if (len == 0 || len > kMaxJavaNameBytes) return false;
  out.assign(reinterpret_cast<const char*>(head.data() + body), std::min<size_t>(len, head.size() - body));
  if (out.size() < len) {
    out.resize(len);
    if (!mem.read(sym + body, out.data(), len)) return false;
  }
  for (char& c : out)  // modified UTF-8 passes; control bytes do not
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return true;
}

const HotSpotWalker::Method* HotSpotWalker::method(MemReader& mem, uint64_t m) {
  if (!m || (m & 7)) return nullptr;
  std::vector<uint8_t> mh(std::max(l_.method_const, l_.method_access) + 8);
  if (!mem.read(m, mh.data(), mh.size())) return nullptr;
  Method d;
  d.const_method = get<uint64_t>(mh, l_.method_const);
  d.native = (get<uint16_t>(mh, l_.method_access) & l_.acc_native) != 0;
  std::vector<uint8_t> cm(l_.const_size);
  if (!d.const_method || (d.const_method & 7) || !mem.read(d.const_method, cm.data(), cm.size())) return nullptr;
  uint64_t cp = get<uint64_t>(cm, l_.const_constants);
  d.code_size = get<uint16_t>(cm, l_.const_code_size);
  uint16_t name_index = get<uint16_t>(cm, l_.const_name_index);
  uint32_t flags = l_.const_flags_bytes == 4 ? get<uint32_t>(cm, l_.const_flags) : get<uint16_t>(cm, l_.const_flags);
  d.code_base = d.const_method + l_.const_size;
  std::vector<uint8_t> pool(l_.pool_size);
  if (!cp || (cp & 7) || !mem.read(cp, pool.data(), pool.size())) return nullptr;
  uint64_t holder = get<uint64_t>(pool, l_.pool_holder);
  int32_t length = get<int32_t>(pool, l_.pool_length);
  if (!holder || name_index == 0 || name_index >= length) return nullptr;
  uint64_t name_sym = 0, klass_sym = 0;
  std::array<MemReader::Op, 2> ops{{{cp + l_.pool_size + name_index * 8ull, &name_sym, 8},
                                    {holder + l_.klass_name, &klass_sym, 8}}};
  mem.read_batch(ops);
  std::string name, klass;
  if (!ops[0].ok || !ops[1].ok || !read_symbol(mem, name_sym, name) || !read_symbol(mem, klass_sym, klass))
    return nullptr;
  // "java/lang/Thread" -> "java.lang.Thread"; a hidden class's "+0x..." as
  // Java prints it ("/0x...").
  for (char& c : klass)
    if (c == '/') c = '.';
  if (size_t plus = klass.rfind("+0x"); plus != std::string::npos) klass[plus] = '/';
  d.name = klass + "." + name;
  uint16_t source = 0;
  if (l_.pool_source_file != kHsNone) {
    source = get<uint16_t>(pool, l_.pool_source_file);
  } else if (l_.klass_source_file != kHsNone) {
    mem.read_value(holder + l_.klass_source_file, &source);
  }
  if (source > 0 && source < length) {
    uint64_t file_sym = 0;
    if (mem.read_value(cp + l_.pool_size + source * 8ull, &file_sym)) read_symbol(mem, file_sym, d.file);
  }
  // The line number table follows the bytecodes, as long as it says.
  if ((flags & l_.const_has_linenumbers) && !d.native) {
    std::vector<uint8_t> t;
    for (size_t want = 256; want <= kMaxLineTableBytes; want *= 4) {
      t.resize(want);
      size_t got = want;
      while (got >= 16 && !mem.read(d.code_base + d.code_size, t.data(), got)) got /= 2;
      if (got < 16) break;
      std::vector<std::pair<uint32_t, uint32_t>> pairs;
      size_t used = 0;
      if (decode_line_table(std::span<const uint8_t>(t.data(), got), excluded_, pairs, 1u << 16, &used)) {
        d.lines = std::move(pairs);
        break;
      }
      if (got < want) break;  // the readable part had no end
    }
  }
  if (methods_.size() >= kMaxCachedMethods || line_pairs_held_ + d.lines.size() > kMaxCachedLinePairs) {
    methods_.clear();
    line_pairs_held_ = 0;
  }
  line_pairs_held_ += d.lines.size();
  auto& slot = methods_[m];
  line_pairs_held_ -= slot.lines.size();
  return &(slot = std::move(d));
}

void HotSpotWalker::name_frames(MemReader& mem, Walk& w, JavaCapture& out) {
  // Each Method* once: the cached ones re-checked in one batched read (the
  // ConstMethod they were decoded from must still be theirs), the others
  // decoded.
  std::vector<uint64_t> ms;
  for (const auto& seg : w.segments)
    for (const auto& p : seg)
      if (p.method) ms.push_back(p.method);
  std::sort(ms.begin(), ms.end());
  ms.erase(std::unique(ms.begin(), ms.end()), ms.end());
  std::vector<uint64_t> now(ms.size(), 0);
  std::vector<MemReader::Op> ops;
  for (size_t i = 0; i < ms.size(); ++i)
    if (methods_.count(ms[i])) ops.push_back({ms[i] + l_.method_const, &now[i], 8});
  mem.read_batch(ops);
  std::unordered_map<uint64_t, const Method*> named;
  size_t k = 0;
  for (size_t i = 0; i < ms.size(); ++i) {
    auto it = methods_.find(ms[i]);
    const Method* d = nullptr;
    if (it != methods_.end()) {
      bool same = ops[k].ok && now[i] == it->second.const_method;
      ++k;
      d = same ? &it->second : method(mem, ms[i]);
    } else {
      d = method(mem, ms[i]);
    }
    named[ms[i]] = d;
  }
  for (size_t s = 0; s < w.segments.size() && s < out.segments.size(); ++s) {
    auto& phys = w.segments[s];
    auto& frames = out.segments[s].frames;
    frames.resize(phys.size());
    for (size_t i = 0; i < phys.size(); ++i) {
      const Physical& p = phys[i];
      JavaFrame& f = frames[i];
      f.kind = p.kind;
      f.jit = p.kind != JavaFrame::Kind::Interpreted;
      if (p.kind == JavaFrame::Kind::Stub) {
        f.name = p.stub.empty() ? "<stub>" : p.stub;
        continue;
      }
      const Method* d = p.method ? named[p.method] : nullptr;
      if (!d) {
        f.kind = JavaFrame::Kind::Unreadable;
        continue;
      }
      f.name = d->name;
      f.file = d->file;
      if (d->native) {
        f.kind = JavaFrame::Kind::Native;
        continue;
      }
      int32_t bci = p.bci;
      if (p.kind == JavaFrame::Kind::Interpreted) {
        // The bcp: the slot below the method's that points into its bytecodes
        // (the slot learned once is tried first).
        bci = -1;
        auto in_code = [&](uint64_t v) { return v >= d->code_base && v < d->code_base + d->code_size; };
        if (in_code(p.bcp_reg)) {
          bci = static_cast<int32_t>(p.bcp_reg - d->code_base);  // the leaf's live bcp
        } else if (bcp_slot_ > 0 && in_code(p.below[static_cast<size_t>(bcp_slot_ - 1)])) {
          bci = static_cast<int32_t>(p.below[static_cast<size_t>(bcp_slot_ - 1)] - d->code_base);
        } else {
          for (size_t j = 0; j < p.below.size(); ++j)
            if (in_code(p.below[j])) {
              bci = static_cast<int32_t>(p.below[j] - d->code_base);
              bcp_slot_ = static_cast<int>(j + 1);
              break;
            }
        }
      }
      // A bci the frame does not say (no bcp yet, a scope without one)
      // leaves the line unknown rather than taking the method's first.
      if (bci >= 0 && static_cast<uint32_t>(bci) < d->code_size) {
        f.bci = bci;
        f.line = java_line(d->lines, bci);
      }
    }
  }
}

}  // namespace jankbpf::runtime
