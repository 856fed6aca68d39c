// HotSpot frame decoding (issue 29) on memory and a stack a watched JVM
// controls: its tables, code cache, segment maps, code blobs, PcDescs,
// scopes, Methods, constant pools, symbols, line number tables and thread
// list may all be anything. The input: 48 bytes of registers (pc, sp
// offset, fp offset, lr, bcp, tid), then the copied stack (at kSp), then
// the process's memory (at kBase), whose first words are the JVM's statics
// (CodeCache::_heaps, its bounds, the interpreter's code, the call stub's
// return, the thread list, the version) and gHotSpotVM* exports. The walk
// and the tables' reader must stay within their bounds, never spin, never
// read more than they may at once.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "input_memory.h"
#include "runtime/hotspot_frames.h"
#include "runtime/hotspot_layout.h"

using namespace jankbpf::runtime;
using jankbpf::fuzz::InputMemory;

namespace {

constexpr uint64_t kBase = 0x7f0000000000, kSp = 0x7ffd00000000;

// Debian's OpenJDK 17 (x86_64), as its tables say; the statics at the
// start of the input.
HotSpotLayout jdk17() {
  HotSpotLayout l;
  l.code_heaps = kBase;
  l.code_low = kBase + 8;
  l.code_high = kBase + 16;
  l.interpreter_code = kBase + 24;
  l.call_stub_return = kBase + 32;
  l.java_thread_list = kBase + 40;
  l.vm_major_version = kBase + 48;
  l.array_len = 0, l.array_data = 8;
  l.heap_memory = 8, l.heap_segmap = 120, l.heap_log2_segment = 256;
  l.vspace_low = 16, l.vspace_high_boundary = 8;
  l.heap_block_size = 16, l.block_used = 8;
  l.stubq_buffer = 8, l.stubq_limit = 20;
  l.blob_name = 96, l.blob_size = 12, l.blob_frame_complete = 20, l.blob_frame_size = 28;
  l.blob_code_begin = 32, l.blob_code_end = 40, l.blob_data_offset = 24, l.blob_header_bytes = 104;
  l.nm_method = 112, l.nm_compile_id = 304, l.nm_scopes_pcs = 268, l.nm_pcs_end = 272, l.nm_scopes_data = 120;
  l.nm_metadata = 260, l.nm_deopt_handler = 128, l.nm_orig_pc = 300, l.nm_header_bytes = 352;
  l.pc_desc_size = 16, l.pc_desc_pc = 0, l.pc_desc_scope = 4;
  l.method_const = 8, l.method_access = 40;
  l.const_constants = 8, l.const_code_size = 32, l.const_name_index = 34, l.const_flags = 28, l.const_size = 48;
  l.pool_holder = 24, l.pool_length = 60, l.pool_source_file = 54, l.pool_size = 72;
  l.klass_name = 24, l.symbol_length = 4, l.symbol_body = 6;
  l.list_length = 4, l.list_threads = 16;
  l.thread_osthread = 560, l.thread_anchor = 656, l.thread_state = 824, l.osthread_tid = 208;
  l.anchor_sp = 0, l.anchor_pc = 8, l.anchor_fp = 16, l.wrapper_anchor = 32;
  return l;
}

template <typename T>
T take(const uint8_t*& d, size_t& n) {
  T v{};
  if (n >= sizeof v) {
    std::memcpy(&v, d, sizeof v);
    d += sizeof v;
    n -= sizeof v;
  }
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 48) return 0;
  const uint64_t pc = take<uint64_t>(data, size), sp_off = take<uint64_t>(data, size),
                 fp_off = take<uint64_t>(data, size), lr = take<uint64_t>(data, size),
                 bcp = take<uint64_t>(data, size), tid = take<uint64_t>(data, size);
  size_t split = std::min<size_t>(size / 2, 16384) & ~size_t{7};
  InputMemory mem(data + split, size - split, kBase, kMaxPcDescBytes);
  // The tables, through exports in the input (their values read from it).
  HotSpotExports ex;
  static const char* const kNames[] = {
      "Structs", "StructEntryArrayStride", "StructEntryTypeNameOffset", "StructEntryFieldNameOffset",
      "StructEntryIsStaticOffset", "StructEntryOffsetOffset", "StructEntryAddressOffset", "Types",
      "TypeEntryArrayStride", "TypeEntryTypeNameOffset", "TypeEntrySizeOffset", "IntConstants",
      "IntConstantEntryArrayStride", "IntConstantEntryNameOffset", "IntConstantEntryValueOffset", "LongConstants",
      "LongConstantEntryArrayStride", "LongConstantEntryNameOffset", "LongConstantEntryValueOffset"};
  uint64_t at = kBase + 64;
  for (const char* n : kNames) ex[n] = at, at += 8;
  if (auto tables = read_vm_tables(mem, ex, nullptr)) {
    if (tables->fields.size() + tables->sizes.size() + tables->constants.size() > 4 * kMaxVmTableEntries) abort();
    hotspot_layout_from(*tables, false, nullptr);
    hotspot_layout_from(*tables, true, nullptr);
  }
  for (bool arm64 : {false, true}) {
    HotSpotWalker w(jdk17(), {}, arm64);
    const uint64_t sp = kSp + (sp_off % 64) * 8;
    NativeStack s{pc, sp, kSp + (fp_off % (split + 64)), {data, split}, lr, bcp};
    for (int round = 0; round < 2; ++round) {  // the second walk runs on the caches
      JavaCapture c = w.walk(mem, tid, s);
      if (c.segments.size() > kMaxJavaSegments || c.frames() > kMaxJavaFrames + kMaxInlineDepth + 1) abort();
      for (const auto& seg : c.segments)
        for (const auto& f : seg.frames) {
          if (f.name.size() > 2 * kMaxJavaNameBytes + 1 || f.file.size() > kMaxJavaNameBytes) abort();
          if (f.kind == JavaFrame::Kind::Unreadable && (!f.name.empty() || f.line)) abort();
        }
    }
    if (w.cached_blobs() > kMaxCachedBlobs || w.cached_methods() > kMaxCachedMethods) abort();
  }
  return 0;
}
