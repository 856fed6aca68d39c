// The physical walk (hotspot_frames.h): the code cache's heaps and
// segment maps, code blobs (cached, re-checked each sample), PcDescs and
// scopes, and frame by frame from the sample's registers or the thread's
// last Java frame to the call stub.
#include <algorithm>
#include <array>
#include <cstring>

#include "runtime/hotspot_walk.h"
#include "util/clock.h"

namespace jankbpf::runtime {

using hotspot_detail::get;
using hotspot_detail::kSegmapFree;
using hotspot_detail::kUserAddrMask;

bool HotSpotWalker::init(MemReader& mem) {
  if (ready_) return true;
  int32_t major = 0;
  uint64_t lo = 0, hi = 0, heaps = 0, interp = 0, call_ret = 0;
  std::array<MemReader::Op, 6> ops{{{l_.vm_major_version, &major, sizeof major},
                                    {l_.code_low, &lo, 8},
                                    {l_.code_high, &hi, 8},
                                    {l_.code_heaps, &heaps, 8},
                                    {l_.interpreter_code, &interp, 8},
                                    {l_.call_stub_return, &call_ret, 8}}};
  mem.read_batch(ops);
  for (const auto& o : ops)
    if (!o.ok) return false;
  if (!heaps || !interp || !call_ret || lo >= hi) return false;  // still starting
  // The heaps (profiled, non-profiled, non-nmethod code; one without
  // segmentation): reserved once at startup, never moved.
  std::vector<uint8_t> ga(std::max(l_.array_len, l_.array_data) + 8);
  if (!mem.read(heaps, ga.data(), ga.size())) return false;
  int32_t n = get<int32_t>(ga, l_.array_len);
  uint64_t data = get<uint64_t>(ga, l_.array_data);
  if (n <= 0 || n > 16) return false;
  std::vector<uint64_t> ptrs(static_cast<size_t>(n));
  if (!mem.read(data, ptrs.data(), ptrs.size() * 8)) return false;
  std::vector<Heap> hs;
  size_t need = std::max({l_.heap_memory + l_.vspace_high_boundary, l_.heap_memory + l_.vspace_low,
                          l_.heap_segmap + l_.vspace_low, l_.heap_log2_segment}) + 8;
  for (uint64_t p : ptrs) {
    std::vector<uint8_t> h(need);
    if (!mem.read(p, h.data(), h.size())) return false;
    Heap heap;
    heap.lo = get<uint64_t>(h, l_.heap_memory + l_.vspace_low);
    heap.hi = get<uint64_t>(h, l_.heap_memory + l_.vspace_high_boundary);
    heap.segmap = get<uint64_t>(h, l_.heap_segmap + l_.vspace_low);
    heap.log2_segment = get<uint32_t>(h, l_.heap_log2_segment);
    if (heap.lo >= heap.hi || heap.log2_segment < 4 || heap.log2_segment > 16 || !heap.segmap) return false;
    hs.push_back(heap);
  }
  std::vector<uint8_t> q(std::max(l_.stubq_buffer, l_.stubq_limit) + 8);
  if (!mem.read(interp, q.data(), q.size())) return false;
  interp_lo_ = get<uint64_t>(q, l_.stubq_buffer);
  int32_t limit = get<int32_t>(q, l_.stubq_limit);
  if (!interp_lo_ || limit <= 0) return false;
  interp_hi_ = interp_lo_ + static_cast<uint32_t>(limit);
  heaps_ = std::move(hs);
  code_lo_ = lo;
  code_hi_ = hi;
  call_stub_ret_ = call_ret & kUserAddrMask;
  excluded_ = major >= 20 ? 1 : 0;  // UNSIGNED5 without null bytes since JDK 20
  ready_ = true;
  return true;
}

const HotSpotWalker::Blob* HotSpotWalker::read_blob(MemReader& mem, uint64_t start) {
  std::vector<uint8_t> h(l_.nm_header_bytes);
  if (!mem.read(start, h.data(), h.size())) {
    h.resize(l_.blob_header_bytes);
    if (!mem.read(start, h.data(), h.size())) return nullptr;
  }
  Blob b;
  b.start = start;
  int32_t size = get<int32_t>(h, l_.blob_size);
  if (size <= 0 || size > (1 << 30)) return nullptr;
  b.end = start + static_cast<uint32_t>(size);
  if (l_.blob_code_offset != kHsNone) {
    b.code_begin = start + get<uint32_t>(h, l_.blob_code_offset);
    b.code_end = start + get<uint32_t>(h, l_.blob_data_offset);
  } else {
    b.code_begin = get<uint64_t>(h, l_.blob_code_begin);
    b.code_end = get<uint64_t>(h, l_.blob_code_end);
  }
  if (b.code_begin < start || b.code_begin > b.code_end || b.code_end > b.end) return nullptr;
  b.frame_size = get<int32_t>(h, l_.blob_frame_size);
  b.frame_complete = l_.blob_frame_complete_bytes == 2 ? get<int16_t>(h, l_.blob_frame_complete)
                                                       : get<int32_t>(h, l_.blob_frame_complete);
  if (b.frame_size < 0 || b.frame_size > (1 << 20)) return nullptr;
  b.name_ptr = get<uint64_t>(h, l_.blob_name);
  auto nt = blob_names_.find(b.name_ptr);
  if (nt == blob_names_.end()) {
    std::string name;
    char buf[64];
    size_t n = sizeof buf;
    while (n && !mem.read(b.name_ptr, buf, n)) n /= 2;
    const char* z = n ? static_cast<const char*>(std::memchr(buf, 0, n)) : nullptr;
    if (z) name.assign(buf, static_cast<size_t>(z - buf));
    for (char& c : name)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    if (blob_names_.size() >= 4096) blob_names_.clear();
    nt = blob_names_.emplace(b.name_ptr, std::move(name)).first;
  }
  b.name = nt->second;
  if (l_.blob_kind != kHsNone) b.nmethod = get<uint8_t>(h, l_.blob_kind) == l_.blob_kind_nmethod;
  else b.nmethod = b.name == "nmethod" || b.name == "native nmethod";
  if (b.nmethod) {
    if (h.size() < l_.nm_header_bytes) return nullptr;
    b.method = get<uint64_t>(h, l_.nm_method);
    b.compile_id = get<int32_t>(h, l_.nm_compile_id);
    if (l_.nm_offsets_relative) {
      uint64_t imm = get<uint64_t>(h, l_.nm_immutable);
      b.pcs_lo = imm + get<uint32_t>(h, l_.nm_scopes_pcs);
      b.pcs_hi = imm + get<uint32_t>(h, l_.nm_pcs_end);
      b.scopes_data = b.pcs_hi;
    } else {
      b.pcs_lo = start + get<uint32_t>(h, l_.nm_scopes_pcs);
      b.pcs_hi = start + get<uint32_t>(h, l_.nm_pcs_end);
      b.scopes_data = get<uint64_t>(h, l_.nm_scopes_data);
      if (l_.nm_metadata != kHsNone) b.metadata = start + get<uint32_t>(h, l_.nm_metadata);
      if (l_.nm_deopt_handler != kHsNone) b.deopt_handler = get<uint64_t>(h, l_.nm_deopt_handler);
    }
    if (l_.nm_orig_pc != kHsNone) b.orig_pc_offset = get<int32_t>(h, l_.nm_orig_pc);
    if (b.pcs_lo > b.pcs_hi || b.pcs_hi - b.pcs_lo > kMaxPcDescBytes) b.pcs_lo = b.pcs_hi = 0;
  }
  auto [it, fresh] = blobs_.insert_or_assign(start, std::move(b));
  (void)fresh;
  return &it->second;
}

const HotSpotWalker::Blob* HotSpotWalker::blob_at(MemReader& mem, Walk& w, uint64_t pc) {
  auto it = blobs_.upper_bound(pc);
  if (it != blobs_.begin()) {
    --it;
    if (pc < it->second.end) {
      w.used_blobs.push_back(it->first);
      return &it->second;
    }
  }
  for (const Heap& h : heaps_) {
    if (pc < h.lo || pc >= h.hi) continue;
    // The segment map: a byte per segment, the hops back to its block's
    // first segment (0 there), 0xff for free ones. Read a window at a time.
    uint64_t idx = (pc - h.lo) >> h.log2_segment;
    uint8_t win[64];
    uint64_t win_lo = 1, win_hi = 0;  // empty
    for (size_t hops = 0;; ++hops) {
      if (hops > kMaxSegmapHops) return nullptr;
      if (idx < win_lo || idx >= win_hi) {
        win_lo = idx >= sizeof win - 1 ? idx - (sizeof win - 1) : 0;
        win_hi = idx + 1;
        if (!mem.read(h.segmap + win_lo, win, win_hi - win_lo)) return nullptr;
      }
      uint8_t hop = win[idx - win_lo];
      if (hop == kSegmapFree) return nullptr;
      if (hop == 0) break;
      if (hop > idx) return nullptr;
      idx -= hop;
    }
    uint64_t block = h.lo + (idx << h.log2_segment);
    uint8_t used = 0;
    if (!mem.read_value(block + l_.block_used, &used) || !used) return nullptr;
    if (blobs_.size() >= kMaxCachedBlobs) return nullptr;  // full for this walk; cleared at the next
    const Blob* b = read_blob(mem, block + l_.heap_block_size);
    return b && pc >= b->start && pc < b->end ? b : nullptr;
  }
  return nullptr;
}

const std::vector<std::pair<uint64_t, int32_t>>* HotSpotWalker::scopes(MemReader& mem, Blob& b, uint64_t pc,
                                                                      bool exact) {
  // Cached by pc; an exact match needed but not found is cached as empty.
  uint64_t key = pc | (exact ? uint64_t{1} << 63 : 0);
  auto it = b.scope_cache.find(key);
  if (it != b.scope_cache.end()) return it->second.empty() ? nullptr : &it->second;
  std::vector<std::pair<uint64_t, int32_t>> chain;
  auto done = [&]() -> const std::vector<std::pair<uint64_t, int32_t>>* {
    if (b.scope_cache.size() >= kMaxScopesPerBlob) b.scope_cache.clear();
    auto& slot = b.scope_cache[key] = std::move(chain);
    return slot.empty() ? nullptr : &slot;
  };
  if (!b.pcs_lo || pc < b.code_begin) return done();
  // PcDescs are sorted by pc offset from the code's start: the one at a
  // return address exactly, else (a sample between two) the next one.
  std::vector<uint8_t> pcs(b.pcs_hi - b.pcs_lo);
  if (pcs.empty() || !mem.read(b.pcs_lo, pcs.data(), pcs.size())) return done();
  const size_t n = pcs.size() / l_.pc_desc_size;
  const int64_t want = static_cast<int64_t>(pc - b.code_begin);
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (get<int32_t>(pcs, mid * l_.pc_desc_size + l_.pc_desc_pc) < want) lo = mid + 1;
    else hi = mid;
  }
  if (lo == n) return done();
  int32_t found_pc = get<int32_t>(pcs, lo * l_.pc_desc_size + l_.pc_desc_pc);
  if (exact && found_pc != want) return done();
  int32_t decode = get<int32_t>(pcs, lo * l_.pc_desc_size + l_.pc_desc_scope);
  if (decode <= 0) {  // serialized_null: the method itself, the bci not recorded
    chain.emplace_back(b.method, -1);
    return done();
  }
  // Each scope: the sender's offset, the method's metadata index, bci + 1;
  // innermost first, to the outermost (sender 0).
  std::vector<uint32_t> indexes;
  for (size_t depth = 0; decode > 0 && depth < kMaxInlineDepth; ++depth) {
    std::array<uint8_t, 16> buf{};
    if (!b.scopes_data || !mem.read(b.scopes_data + static_cast<uint32_t>(decode), buf.data(), buf.size())) {
      chain.clear();
      return done();
    }
    size_t pos = 0;
    uint32_t sender = 0, index = 0, bci = 0;
    if (!read_unsigned5(buf, pos, sender, excluded_) || !read_unsigned5(buf, pos, index, excluded_) ||
        !read_unsigned5(buf, pos, bci, excluded_) || static_cast<int32_t>(sender) >= decode) {
      chain.clear();
      return done();
    }
    chain.emplace_back(0, static_cast<int32_t>(bci) + l_.invocation_entry_bci);
    indexes.push_back(index);
    decode = static_cast<int32_t>(sender);  // senders are written before the scopes that name them
  }
  if (decode > 0) {  // deeper than the bound: not a chain to believe
    chain.clear();
    return done();
  }
  // Methods from the nmethod's metadata (1-based); the outermost scope is
  // the nmethod's own method whatever the table says.
  std::vector<MemReader::Op> ops;
  for (size_t i = 0; i < chain.size(); ++i)
    if (b.metadata && indexes[i] > 0)
      ops.push_back({b.metadata + (indexes[i] - 1) * 8ull, &chain[i].first, 8});
  mem.read_batch(ops);
  chain.back().first = b.method;
  return done();
}

bool HotSpotWalker::plausible_return(MemReader& mem, Walk& w, uint64_t ret) {
  if (ret == call_stub_ret_ || in_interpreter(ret)) return true;
  if (ret < code_lo_ || ret >= code_hi_) return false;
  const Blob* b = blob_at(mem, w, ret);
  if (!b || ret < b->code_begin || ret >= b->code_end) return false;
  // A call returns to a debug point: every call site of compiled code has
  // its PcDesc at the return address.
  if (b->nmethod) return scopes(mem, const_cast<Blob&>(*b), ret, true) != nullptr;
  return b->frame_size > 0;
}

// Frames from (pc, sp, fp) to the call stub that entered Java, and on
// through the earlier Java calls the call wrappers' anchors lead to.
void HotSpotWalker::walk_segment(MemReader& mem, Walk& w, uint64_t pc, uint64_t sp, uint64_t fp, uint64_t lr,
                                 bool leaf, JavaCapture& out) {
  uint64_t usp = sp;  // the unextended sp: where a compiled frame's size counts from
  bool first = true;
  JavaSegment seg;
  std::vector<Physical> phys;
  auto finish = [&](bool cut) {
    seg.cut = cut;
    out.segments.push_back(std::move(seg));
    w.segments.push_back(std::move(phys));
  };
  auto slot = [&](uint64_t base, int64_t words, uint64_t* v) {
    return w.stack.word(base + static_cast<uint64_t>(words * 8), v);
  };
  while (true) {
    if (w.physical++ >= kMaxJavaPhysical || w.logical >= kMaxJavaFrames) return finish(true);
    pc &= kUserAddrMask;
    if (pc == call_stub_ret_) {
      // The entry frame: Java was called from C++ here. The wrapper's anchor
      // is the thread's last Java frame before that call (sp 0: none).
      uint64_t ret = 0, wrapper = 0;
      if (!w.stack.word(fp + 8, &ret) || !slot(fp, l_.entry_call_wrapper, &wrapper)) return finish(true);
      seg.exit_pc = ret & kUserAddrMask;
      std::vector<uint8_t> anchor(std::max({l_.anchor_sp, l_.anchor_pc, l_.anchor_fp}) + 8);
      if (!wrapper || !mem.read(wrapper + l_.wrapper_anchor, anchor.data(), anchor.size())) return finish(true);
      uint64_t a_sp = get<uint64_t>(anchor, l_.anchor_sp), a_pc = get<uint64_t>(anchor, l_.anchor_pc),
               a_fp = get<uint64_t>(anchor, l_.anchor_fp);
      finish(false);
      if (!a_sp) return;  // the thread's first Java call
      if (out.segments.size() >= kMaxJavaSegments || a_sp <= sp || (!a_pc && !w.stack.word(a_sp - 8, &a_pc))) {
        out.segments.back().cut = true;
        return;
      }
      return walk_segment(mem, w, a_pc, a_sp, a_fp, 0, false, out);
    }
    const bool interp = in_interpreter(pc);
    const Blob* b = interp ? nullptr : blob_at(mem, w, pc);
    if (!interp && !b) return finish(true);
    if (first) {
      seg.blob_lo = interp ? interp_lo_ : b->start;
      seg.blob_hi = interp ? interp_hi_ : b->end;
    }
    // 1. What runs in the frame.
    if (interp) {
      // Method* and the bcp in the slots below fp (which one holds the
      // bcp is found when the method is known: name_frames).
      Physical p;
      p.kind = JavaFrame::Kind::Interpreted;
      if (fp <= sp || !slot(fp, l_.interp_method, &p.method)) return finish(true);
      for (size_t i = 0; i < p.below.size(); ++i)
        if (!slot(fp, l_.interp_method - 1 - static_cast<int64_t>(i), &p.below[i])) p.below[i] = 0;
      if (leaf && first) p.bcp_reg = w.interp_bcp;
      phys.push_back(std::move(p));
      ++w.logical;
    } else if (b->nmethod) {
      uint64_t at = pc;
      // A frame being deoptimized returns to the deopt handler; its own pc
      // is saved in the frame.
      if (b->deopt_handler && pc == b->deopt_handler && b->orig_pc_offset > 0) {
        if (!w.stack.word(usp + static_cast<uint32_t>(b->orig_pc_offset), &at)) return finish(true);
        at &= kUserAddrMask;
      }
      // The pc's scopes: the methods inlined there, innermost first.
      if (auto* chain = scopes(mem, const_cast<Blob&>(*b), at, false)) {
        for (size_t i = 0; i < chain->size(); ++i) {
          Physical q;
          q.kind = i + 1 < chain->size() ? JavaFrame::Kind::Inlined : JavaFrame::Kind::Compiled;
          q.method = (*chain)[i].first;
          q.bci = (*chain)[i].second;
          phys.push_back(std::move(q));
          ++w.logical;
        }
      } else {
        Physical q;
        q.kind = JavaFrame::Kind::Compiled;
        q.method = b->method;
        phys.push_back(std::move(q));
        ++w.logical;
      }
    } else {
      Physical p;
      p.kind = JavaFrame::Kind::Stub;
      p.stub = b->name;
      phys.push_back(std::move(p));
      ++w.logical;
    }
    // 2. Its caller.
    uint64_t next_pc = 0, next_sp = 0, next_fp = 0, next_usp = 0;
    if (interp) {
      // By the frame pointer chain; the sender's sp as it was before the
      // call is in the sender-sp slot.
      if (!slot(fp, l_.interp_sender_sp, &next_usp) || !w.stack.word(fp + 8, &next_pc) ||
          !w.stack.word(fp, &next_fp))
        return finish(true);
      next_sp = fp + 16;
    } else if (b->frame_size > 0 && (!leaf || !first || b->frame_complete < 0 ||
                                     pc >= b->code_begin + static_cast<uint32_t>(b->frame_complete))) {
      // A built frame of frame_size words: the return address in its last
      // word, the saved fp below it.
      uint64_t s = usp + static_cast<uint64_t>(b->frame_size) * 8;
      if (!w.stack.word(s - 8, &next_pc) || !w.stack.word(s - 16, &next_fp)) return finish(true);
      next_sp = next_usp = s;
    } else if (leaf && first) {
      // A leaf still in its prologue (or epilogue), or a frameless stub:
      // the return address is in lr (arm64) or at [sp] (x86_64), or at
      // [sp + 8] once fp is pushed, or behind a frame record the stub
      // built -- whichever returns to where a call can return (a debug
      // point of compiled code, the interpreter, the call stub), never a
      // guess.
      uint64_t ret = 0, saved = 0;
      bool ok = false;
      if (arm64_ && lr && plausible_return(mem, w, lr & kUserAddrMask)) {
        next_pc = lr, next_sp = sp, next_fp = fp, ok = true;
      } else if (!arm64_ && w.stack.word(sp, &ret) && plausible_return(mem, w, ret & kUserAddrMask)) {
        next_pc = ret, next_sp = sp + 8, next_fp = fp, ok = true;
      } else if (w.stack.word(sp + 8, &ret) && plausible_return(mem, w, ret & kUserAddrMask) &&
                 w.stack.word(sp, &saved)) {
        next_pc = ret, next_sp = sp + 16, next_fp = saved, ok = true;
      } else if (fp > sp && w.stack.word(fp + 8, &ret) && plausible_return(mem, w, ret & kUserAddrMask) &&
                 w.stack.word(fp, &saved)) {
        next_pc = ret, next_sp = fp + 16, next_fp = saved, ok = true;
      }
      if (!ok) return finish(true);
      next_usp = next_sp;
    } else {
      return finish(true);  // a frameless blob in the middle of a stack: nowhere to go
    }
    // Stacks grow down: a caller's frame is above its callee's.
    if (next_sp <= sp || next_sp - sp > (64u << 20)) return finish(true);
    pc = next_pc & kUserAddrMask;
    sp = next_sp;
    usp = next_usp && next_usp + (1u << 20) >= sp && next_usp <= sp + (64u << 20) ? next_usp : sp;
    fp = next_fp;
    first = false;
    if (pc != call_stub_ret_ && !in_interpreter(pc) && (pc < code_lo_ || pc >= code_hi_))
      return finish(true);  // left Java other than through the call stub
  }
}

JavaCapture HotSpotWalker::walk(MemReader& mem, uint64_t tid, const NativeStack& s) {
  JavaCapture c;
  c.status = JavaCapture::Status::Unreadable;
  if (!init(mem)) {
    c.read_ns = monotonic_ns();
    return c;
  }
  c.code_lo = code_lo_;
  c.code_hi = code_hi_;
  if (blobs_.size() >= kMaxCachedBlobs) blobs_.clear();
  const uint64_t pc = s.pc & kUserAddrMask;
  const bool in_java = (pc >= code_lo_ && pc < code_hi_) || in_interpreter(pc);
  uint64_t start_pc = pc, start_sp = s.sp, start_fp = s.fp, thread = 0;
  struct Start {
    uint64_t pc, sp, fp;
  };
  std::vector<Start> starts;  // where the walk may begin, tried in order
  if (!in_java) {
    // Native code, the VM or the kernel: Java's frames start at the
    // thread's last Java frame.
    if (!find_thread(mem, tid, &thread)) {
      c.status = JavaCapture::Status::NoThread;
      c.read_ns = monotonic_ns();
      return c;
    }
    std::vector<uint8_t> anchor(std::max({l_.anchor_sp, l_.anchor_pc, l_.anchor_fp}) + 8);
    if (!mem.read(thread + l_.thread_anchor, anchor.data(), anchor.size())) {
      c.read_ns = monotonic_ns();
      return c;
    }
    read_jvm_state(mem, thread, c.jvm);
    start_sp = get<uint64_t>(anchor, l_.anchor_sp);
    start_pc = get<uint64_t>(anchor, l_.anchor_pc);
    start_fp = get<uint64_t>(anchor, l_.anchor_fp);
    c.status = JavaCapture::Status::Ok;
    if (start_sp) {
      starts.push_back({start_pc, start_sp, start_fp});
    } else if (c.jvm.thread_state == l_.state_in_java) {
      // Compiled code called a native leaf without leaving Java (no
      // anchor: a math routine, clock_gettime for System.nanoTime): the
      // walk starts at the return address into compiled code nearest the
      // leaf in the copied stack -- one a call there has (a debug point),
      // then believed only if the walk from it reaches the call stub.
      Walk probe(mem, s);
      const uint64_t end = s.sp + std::min<uint64_t>(s.stack.size(), kMaxLeafScanBytes);
      for (uint64_t a = s.sp; a + 8 <= end && starts.size() < 3; a += 8) {
        uint64_t v = 0;
        if (!probe.stack.word(a, &v)) break;
        v &= kUserAddrMask;
        if (v < code_lo_ || v >= code_hi_ || in_interpreter(v)) continue;
        const Blob* b = blob_at(mem, probe, v);
        if (b && b->nmethod && scopes(mem, const_cast<Blob&>(*b), v, true)) starts.push_back({v, a + 8, s.fp});
      }
    }
    if (starts.empty()) {  // not in a Java call (a VM or GC thread, or one not started yet)
      c.read_ns = monotonic_ns();
      return c;
    }
  } else {
    starts.push_back({start_pc, start_sp, start_fp});
  }
  for (size_t attempt = 0, at = 0; attempt < 2 + starts.size(); ++attempt) {
    Walk w(mem, s);
    JavaCapture out = c;
    uint64_t pc0 = starts[at].pc;
    if (!in_java && !pc0 && !w.stack.word(starts[at].sp - 8, &pc0)) break;
    walk_segment(mem, w, pc0, starts[at].sp, starts[at].fp, s.lr, in_java, out);
    // A start found by the scan must lead to the call stub; else the next.
    if (!in_java && !start_sp && at + 1 < starts.size() && (out.segments.empty() || out.segments[0].cut)) {
      ++at;
      continue;
    }
    // The cached blobs this walk relied on must still be what they were:
    // code unloaded and its memory reused reads differently here.
    std::sort(w.used_blobs.begin(), w.used_blobs.end());
    w.used_blobs.erase(std::unique(w.used_blobs.begin(), w.used_blobs.end()), w.used_blobs.end());
    std::vector<std::vector<uint8_t>> heads(w.used_blobs.size());
    std::vector<MemReader::Op> ops;
    for (size_t i = 0; i < w.used_blobs.size(); ++i) {
      auto it = blobs_.find(w.used_blobs[i]);
      // A stub's header is shorter than an nmethod's (and may end its heap).
      heads[i].resize(it != blobs_.end() && !it->second.nmethod ? l_.blob_header_bytes : l_.nm_header_bytes);
      ops.push_back({w.used_blobs[i], heads[i].data(), heads[i].size()});
    }
    mem.read_batch(ops);
    bool stale = false;
    for (size_t i = 0; i < w.used_blobs.size(); ++i) {
      auto it = blobs_.find(w.used_blobs[i]);
      if (it == blobs_.end()) continue;
      const Blob& b = it->second;
      const auto& h = heads[i];
      bool same = ops[i].ok && get<uint64_t>(h, l_.blob_name) == b.name_ptr &&
                  b.start + static_cast<uint32_t>(get<int32_t>(h, l_.blob_size)) == b.end &&
                  get<int32_t>(h, l_.blob_frame_size) == b.frame_size &&
                  (!b.nmethod || (get<int32_t>(h, l_.nm_compile_id) == b.compile_id &&
                                  get<uint64_t>(h, l_.nm_method) == b.method));
      if (!same) {
        blobs_.erase(it);
        stale = true;
      }
    }
    if (stale && attempt == 0) continue;  // walk again, reading those blobs anew (same start)
    name_frames(mem, w, out);
    c = std::move(out);
    c.status = JavaCapture::Status::Ok;
    break;
  }
  c.read_ns = monotonic_ns();
  return c;
}

}  // namespace jankbpf::runtime
