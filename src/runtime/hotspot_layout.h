// HotSpot's object and frame layout, as the running JVM says: libjvm.so
// exports gHotSpotVMStructs, gHotSpotVMTypes, gHotSpotVMIntConstants and
// gHotSpotVMLongConstants (the tables the Serviceability Agent reads), and
// the entry layout of each (gHotSpotVMStructEntryTypeNameOffset, ...). They
// are read from the process's memory once, and every offset the walker
// uses comes from them: no per-version table. Where releases renamed a
// field (GenericGrowableArray -> GrowableArrayBase, CodeBlob's pointers ->
// offsets in 23), both names are looked for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/mem_reader.h"

namespace jankbpf::runtime {

// The exported symbols of libjvm.so, by name without the gHotSpotVM prefix
// ("Structs", "StructEntryArrayStride", ...), at their addresses in the
// process.
using HotSpotExports = std::unordered_map<std::string, uint64_t>;

// Whether a dynamic symbol's name is one of those exports.
inline bool is_hotspot_export(std::string_view n) { return n.starts_with("gHotSpotVM"); }

// The four tables, as read.
struct VmTables {
  struct Field {
    uint64_t offset = 0;   // non-static: from the object's start
    uint64_t address = 0;  // static: where it lives in the process
    bool is_static = false;
  };
  std::unordered_map<std::string, Field> fields;       // "CodeBlob::_name"
  std::unordered_map<std::string, uint64_t> sizes;     // "nmethod" -> sizeof
  std::unordered_map<std::string, int64_t> constants;  // int and long constants
};

inline constexpr size_t kMaxVmTableEntries = 16384;
inline constexpr size_t kMaxVmNameBytes = 256;

// Reads the tables through `mem` (the live process). nullopt, with `why`,
// when an export is missing or an entry cannot be read.
std::optional<VmTables> read_vm_tables(MemReader& mem, const HotSpotExports& exports, std::string* why);

inline constexpr uint32_t kHsNone = 0xffffffffu;

struct HotSpotLayout {
  // Statics: addresses in the process.
  uint64_t code_heaps = 0;          // &CodeCache::_heaps (GrowableArray<CodeHeap*>*)
  uint64_t code_low = 0, code_high = 0;  // &CodeCache::_low_bound, &_high_bound
  uint64_t interpreter_code = 0;    // &AbstractInterpreter::_code (StubQueue*)
  uint64_t call_stub_return = 0;    // &StubRoutines::_call_stub_return_address
  uint64_t java_thread_list = 0;    // &ThreadsSMRSupport::_java_thread_list
  uint64_t vm_major_version = 0;    // &Abstract_VM_Version::_vm_major_version
  uint64_t collected_heap = 0;      // &Universe::_collectedHeap (0: unknown)

  // GrowableArray
  uint32_t array_len = 0, array_data = 0;
  // CodeHeap, VirtualSpace, HeapBlock
  uint32_t heap_memory = 0, heap_segmap = 0, heap_log2_segment = 0;
  uint32_t vspace_low = 0, vspace_high_boundary = 0;
  uint32_t heap_block_size = 0, block_used = 0;
  // StubQueue (the interpreter's code)
  uint32_t stubq_buffer = 0, stubq_limit = 0;
  // CodeBlob. Up to 22 the code's bounds are pointers (_code_begin,
  // _code_end); from 23 offsets from the blob (_code_offset, _data_offset).
  uint32_t blob_name = 0, blob_size = 0, blob_frame_complete = 0, blob_frame_size = 0;
  uint32_t blob_code_begin = kHsNone, blob_code_end = kHsNone;  // pointers (<= 22)
  uint32_t blob_code_offset = kHsNone, blob_data_offset = 0;    // offsets (23+)
  uint8_t blob_frame_complete_bytes = 4;  // int (<= 22) or int16_t (23+)
  uint32_t blob_kind = kHsNone;           // CodeBlobKind (23+)
  int64_t blob_kind_nmethod = -1;
  uint32_t blob_header_bytes = 0;  // what one read of a blob's header covers
  // nmethod (with CompiledMethod's fields, <= 22)
  uint32_t nm_method = 0, nm_compile_id = 0;
  uint32_t nm_scopes_pcs = 0;     // offset field: from the header (<= 22) or immutable data (23+)
  uint32_t nm_pcs_end = 0;        // _dependencies_offset (<= 22) / _scopes_data_offset (23+)
  uint32_t nm_scopes_data = 0;    // _scopes_data_begin pointer (<= 22) / _scopes_data_offset (23+)
  uint32_t nm_metadata = kHsNone;  // _metadata_offset from the header (<= 22)
  uint32_t nm_immutable = kHsNone; // _immutable_data (23+)
  uint32_t nm_deopt_handler = kHsNone, nm_orig_pc = kHsNone;
  bool nm_offsets_relative = false;  // 23+: scopes from _immutable_data
  uint32_t nm_header_bytes = 0;
  // PcDesc
  uint32_t pc_desc_size = 16, pc_desc_pc = 0, pc_desc_scope = 4;
  // Method, ConstMethod, ConstantPool, Klass, Symbol
  uint32_t method_const = 0, method_access = 0;
  uint32_t const_constants = 0, const_code_size = 0, const_name_index = 0, const_flags = 0;
  uint8_t const_flags_bytes = 2;
  uint32_t const_size = 0;  // sizeof(ConstMethod): the bytecodes follow it
  uint32_t const_has_linenumbers = 1;
  uint32_t pool_holder = 0, pool_length = 0, pool_source_file = kHsNone, pool_size = 0;
  uint32_t klass_source_file = kHsNone;  // InstanceKlass::_source_file_name_index (older JDKs)
  uint32_t klass_name = 0;
  uint32_t symbol_length = 0, symbol_body = 0;
  // Threads
  uint32_t list_length = 0, list_threads = 0;
  uint32_t thread_osthread = 0, thread_anchor = 0, thread_state = 0;
  uint32_t osthread_tid = 0;
  uint32_t anchor_sp = 0, anchor_pc = 8, anchor_fp = 16;
  uint32_t wrapper_anchor = 0;
  // Frames, in words from the frame pointer.
  int32_t interp_sender_sp = -1, interp_method = -3;
  int32_t entry_call_wrapper = -6;
  // Thread states.
  int32_t state_blocked = 10, state_blocked_trans = 11, state_in_vm = 6, state_in_vm_trans = 7;
  int32_t state_in_native = 4, state_in_java = 8;
  uint16_t acc_native = 0x100;  // JVM_ACC_NATIVE (the class-file flag)
  int32_t invocation_entry_bci = -1;
};

// The layout from the tables; nullopt, with `why`, when a field the walk
// needs is missing. `arm64`: the JVM's port, for the frame constants the
// aarch64 port does not export (its frame_aarch64.hpp's, the same from 11
// to 25: interpreter sender sp -1, last sp -2, entry frame's call wrapper
// -8; x86_64 exports them).
std::optional<HotSpotLayout> hotspot_layout_from(const VmTables& t, bool arm64, std::string* why);

}  // namespace jankbpf::runtime
