#include "runtime/hotspot_layout.h"

#include <algorithm>
#include <cstring>

namespace jankbpf::runtime {
namespace {

// C strings of the tables, read once per address (type names repeat: the
// compiler merges identical literals).
class Names {
 public:
  explicit Names(MemReader& mem) : mem_(mem) {}
  // Reads the names at `addrs` ahead, 64 bytes each in batched calls (a
  // JVM's tables have some 1,500 of them); those longer, or at the end of
  // a mapping, are read one by one by get().
  void prefetch(std::vector<uint64_t> addrs) {
    std::sort(addrs.begin(), addrs.end());
    addrs.erase(std::unique(addrs.begin(), addrs.end()), addrs.end());
    constexpr size_t kBatch = 512, kLen = 64;
    std::vector<char> buf(kBatch * kLen);
    for (size_t i = 0; i < addrs.size(); i += kBatch) {
      std::vector<MemReader::Op> ops;
      for (size_t k = i; k < std::min(addrs.size(), i + kBatch); ++k)
        if (addrs[k] && !cache_.count(addrs[k])) ops.push_back({addrs[k], buf.data() + (k - i) * kLen, kLen});
      mem_.read_batch(ops);
      for (const auto& o : ops) {
        if (!o.ok) continue;
        const char* p = static_cast<const char*>(o.out);
        const char* z = static_cast<const char*>(std::memchr(p, 0, kLen));
        if (z && cache_.size() < 4 * kMaxVmTableEntries) cache_.emplace(o.addr, std::string(p, static_cast<size_t>(z - p)));
      }
    }
  }
  bool get(uint64_t addr, std::string& out) {
    auto it = cache_.find(addr);
    if (it != cache_.end()) {
      out = it->second;
      return true;
    }
    out.clear();
    char buf[64];
    for (size_t at = 0; at < kMaxVmNameBytes; at += sizeof buf) {
      size_t n = sizeof buf;
      // The last string of a mapping: a shorter read then, down to a byte.
      while (n && !mem_.read(addr + at, buf, n)) n /= 2;
      if (!n) return false;
      const char* z = static_cast<const char*>(std::memchr(buf, 0, n));
      out.append(buf, z ? static_cast<size_t>(z - buf) : n);
      if (z) {
        if (cache_.size() < 4 * kMaxVmTableEntries) cache_.emplace(addr, out);
        return true;
      }
      if (n < sizeof buf) at -= sizeof buf - n;  // continue right after what was read
    }
    return false;  // no end within the bound: not a name
  }

 private:
  MemReader& mem_;
  std::unordered_map<uint64_t, std::string> cache_;
};

template <typename T>
T at(const std::vector<uint8_t>& b, size_t off) {
  T v{};
  if (off + sizeof v <= b.size()) std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

// Entries of one table, `stride` bytes each, up to the one whose name
// pointer (at `name_off`) is null; `each` gets every entry's bytes.
// The entries of one table, each `stride` bytes, up to the one whose name
// pointer (at `name_off`) is null.
bool entries_of(MemReader& mem, uint64_t base, uint64_t stride, uint64_t name_off,
                std::vector<std::vector<uint8_t>>& out, std::string* why, const char* table);

template <typename Each>
bool for_entries(MemReader& mem, Names& names, uint64_t base, uint64_t stride, uint64_t name_off,
                 std::initializer_list<uint64_t> string_offs, Each each, std::string* why, const char* table) {
  std::vector<std::vector<uint8_t>> all;
  if (!entries_of(mem, base, stride, name_off, all, why, table)) return false;
  std::vector<uint64_t> strings;
  for (const auto& e : all)
    for (uint64_t off : string_offs) strings.push_back(at<uint64_t>(e, off));
  names.prefetch(std::move(strings));
  for (const auto& e : all)
    if (!each(e)) return false;
  return true;
}

bool entries_of(MemReader& mem, uint64_t base, uint64_t stride, uint64_t name_off,
                std::vector<std::vector<uint8_t>>& out, std::string* why, const char* table) {
  if (!base || stride == 0 || stride > 256 || name_off + 8 > stride) {
    if (why) *why = std::string("HotSpot ") + table + " table missing or malformed";
    return false;
  }
  constexpr size_t kChunk = 128;
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < kMaxVmTableEntries; i += kChunk) {
    buf.assign(stride * kChunk, 0);
    size_t got = kChunk;
    // The table may end within the chunk, near the end of its mapping.
    while (got && !mem.read(base + i * stride, buf.data(), got * stride)) got /= 2;
    if (!got) {
      if (why) *why = std::string("HotSpot ") + table + " table unreadable";
      return false;
    }
    for (size_t k = 0; k < got; ++k) {
      std::vector<uint8_t> e(buf.begin() + static_cast<ptrdiff_t>(k * stride),
                             buf.begin() + static_cast<ptrdiff_t>((k + 1) * stride));
      if (at<uint64_t>(e, name_off) == 0) return true;
      out.push_back(std::move(e));
    }
    if (got < kChunk) i -= kChunk - got;
  }
  if (why) *why = std::string("HotSpot ") + table + " table has no end";
  return false;
}

}  // namespace

std::optional<VmTables> read_vm_tables(MemReader& mem, const HotSpotExports& ex, std::string* why) {
  // The entry layouts are variables (set when libjvm is loaded), read from
  // the process like the tables' addresses.
  std::unordered_map<std::string, uint64_t> v;
  for (const auto& [name, addr] : ex) {
    uint64_t value = 0;
    if (!mem.read_value(addr, &value)) {
      if (why) *why = "HotSpot export gHotSpotVM" + name + " unreadable";
      return std::nullopt;
    }
    v[name] = value;
  }
  auto need = [&](const char* n) -> std::optional<uint64_t> {
    auto it = v.find(n);
    if (it == v.end()) return std::nullopt;
    return it->second;
  };
  static const char* const kNeeded[] = {
      "Structs", "StructEntryArrayStride", "StructEntryTypeNameOffset", "StructEntryFieldNameOffset",
      "StructEntryIsStaticOffset", "StructEntryOffsetOffset", "StructEntryAddressOffset", "Types",
      "TypeEntryArrayStride", "TypeEntryTypeNameOffset", "TypeEntrySizeOffset", "IntConstants",
      "IntConstantEntryArrayStride", "IntConstantEntryNameOffset", "IntConstantEntryValueOffset", "LongConstants",
      "LongConstantEntryArrayStride", "LongConstantEntryNameOffset", "LongConstantEntryValueOffset"};
  for (const char* n : kNeeded)
    if (!need(n)) {
      if (why) *why = std::string("HotSpot export gHotSpotVM") + n + " missing";
      return std::nullopt;
    }
  Names names(mem);
  VmTables t;
  std::string type, field;
  const uint64_t s_type = *need("StructEntryTypeNameOffset"), s_field = *need("StructEntryFieldNameOffset"),
                 s_static = *need("StructEntryIsStaticOffset"), s_off = *need("StructEntryOffsetOffset"),
                 s_addr = *need("StructEntryAddressOffset");
  bool ok = for_entries(
      mem, names, *need("Structs"), *need("StructEntryArrayStride"), s_type, {s_type, s_field},
      [&](const std::vector<uint8_t>& e) {
        if (!names.get(at<uint64_t>(e, s_type), type)) return false;
        uint64_t fp = at<uint64_t>(e, s_field);
        if (!fp) return true;  // a type-only entry
        if (!names.get(fp, field)) return false;
        VmTables::Field f;
        f.is_static = at<int32_t>(e, s_static) != 0;
        f.offset = at<uint64_t>(e, s_off);
        f.address = at<uint64_t>(e, s_addr);
        t.fields.emplace(type + "::" + field, f);
        return true;
      },
      why, "structs");
  if (!ok) return std::nullopt;
  const uint64_t t_name = *need("TypeEntryTypeNameOffset"), t_size = *need("TypeEntrySizeOffset");
  ok = for_entries(
      mem, names, *need("Types"), *need("TypeEntryArrayStride"), t_name, {t_name},
      [&](const std::vector<uint8_t>& e) {
        if (!names.get(at<uint64_t>(e, t_name), type)) return false;
        t.sizes.emplace(type, at<uint64_t>(e, t_size));
        return true;
      },
      why, "types");
  if (!ok) return std::nullopt;
  for (const char* kind : {"Int", "Long"}) {
    std::string k = kind;
    const uint64_t c_name = *need((k + "ConstantEntryNameOffset").c_str()),
                   c_value = *need((k + "ConstantEntryValueOffset").c_str());
    const bool is_int = k == "Int";
    ok = for_entries(
        mem, names, *need((k + "Constants").c_str()), *need((k + "ConstantEntryArrayStride").c_str()), c_name, {c_name},
        [&](const std::vector<uint8_t>& e) {
          if (!names.get(at<uint64_t>(e, c_name), type)) return false;
          int64_t value = is_int ? at<int32_t>(e, c_value) : static_cast<int64_t>(at<uint64_t>(e, c_value));
          t.constants.emplace(type, value);
          return true;
        },
        why, is_int ? "int constants" : "long constants");
    if (!ok) return std::nullopt;
  }
  if (t.fields.size() + t.sizes.size() + t.constants.size() >= 4 * kMaxVmTableEntries) {
    if (why) *why = "HotSpot tables too large";
    return std::nullopt;
  }
  return t;
}

std::optional<HotSpotLayout> hotspot_layout_from(const VmTables& t, bool arm64, std::string* why) {
  std::string missing;
  auto field = [&](std::initializer_list<const char*> names, bool required = true) -> const VmTables::Field* {
    for (const char* n : names) {
      auto it = t.fields.find(n);
      if (it != t.fields.end()) return &it->second;
    }
    if (required && missing.empty()) missing = *names.begin();
    return nullptr;
  };
  auto off = [&](std::initializer_list<const char*> names, bool required = true) -> uint32_t {
    const VmTables::Field* f = field(names, required);
    if (!f) return kHsNone;
    if (f->is_static || f->offset > (1u << 20)) {
      if (missing.empty()) missing = *names.begin();
      return kHsNone;
    }
    return static_cast<uint32_t>(f->offset);
  };
  auto stat = [&](std::initializer_list<const char*> names, bool required = true) -> uint64_t {
    const VmTables::Field* f = field(names, required);
    if (!f) return 0;
    if (!f->is_static || !f->address) {
      if (missing.empty()) missing = *names.begin();
      return 0;
    }
    return f->address;
  };
  auto size = [&](const char* n, bool required = true) -> uint32_t {
    auto it = t.sizes.find(n);
    if (it == t.sizes.end() || it->second == 0 || it->second > (1u << 20)) {
      if (required && missing.empty()) missing = std::string("sizeof ") + n;
      return 0;
    }
    return static_cast<uint32_t>(it->second);
  };
  auto constant = [&](std::initializer_list<const char*> names, int64_t dflt) -> int64_t {
    for (const char* n : names) {
      auto it = t.constants.find(n);
      if (it != t.constants.end()) return it->second;
    }
    return dflt;
  };

  HotSpotLayout l;
  l.code_heaps = stat({"CodeCache::_heaps"});
  l.code_low = stat({"CodeCache::_low_bound"});
  l.code_high = stat({"CodeCache::_high_bound"});
  l.interpreter_code = stat({"AbstractInterpreter::_code"});
  l.call_stub_return = stat({"StubRoutines::_call_stub_return_address"});
  l.java_thread_list = stat({"ThreadsSMRSupport::_java_thread_list"});
  l.vm_major_version = stat({"Abstract_VM_Version::_vm_major_version"});
  l.collected_heap = stat({"Universe::_collectedHeap"}, false);

  l.array_len = off({"GrowableArrayBase::_len", "GenericGrowableArray::_len"});
  l.array_data = off({"GrowableArray<int>::_data"});
  l.heap_memory = off({"CodeHeap::_memory"});
  l.heap_segmap = off({"CodeHeap::_segmap"});
  l.heap_log2_segment = off({"CodeHeap::_log2_segment_size"});
  l.vspace_low = off({"VirtualSpace::_low"});
  l.vspace_high_boundary = off({"VirtualSpace::_high_boundary"});
  l.heap_block_size = size("HeapBlock");
  l.block_used = off({"HeapBlock::Header::_used"});
  l.stubq_buffer = off({"StubQueue::_stub_buffer"});
  l.stubq_limit = off({"StubQueue::_buffer_limit"});

  l.blob_name = off({"CodeBlob::_name"});
  l.blob_size = off({"CodeBlob::_size"});
  l.blob_frame_complete = off({"CodeBlob::_frame_complete_offset"});
  l.blob_frame_size = off({"CodeBlob::_frame_size"});
  l.blob_data_offset = off({"CodeBlob::_data_offset"});
  l.blob_code_begin = off({"CodeBlob::_code_begin"}, false);
  l.blob_code_end = off({"CodeBlob::_code_end"}, false);
  l.blob_code_offset = off({"CodeBlob::_code_offset"}, false);
  if (l.blob_code_begin == kHsNone && l.blob_code_offset == kHsNone && missing.empty())
    missing = "CodeBlob::_code_begin";
  l.blob_kind = off({"CodeBlob::_kind"}, false);
  l.blob_kind_nmethod = constant({"CodeBlobKind::Nmethod"}, -1);
  // int up to 22, int16_t since: told apart by the blob's layout version.
  l.blob_frame_complete_bytes = l.blob_code_offset != kHsNone ? 2 : 4;
  l.blob_header_bytes = size("CodeBlob");

  l.nm_method = off({"CompiledMethod::_method", "nmethod::_method"});
  l.nm_compile_id = off({"nmethod::_compile_id"});
  l.nm_scopes_pcs = off({"nmethod::_scopes_pcs_offset"});
  l.nm_immutable = off({"nmethod::_immutable_data"}, false);
  l.nm_offsets_relative = l.nm_immutable != kHsNone;
  if (l.nm_offsets_relative) {
    l.nm_pcs_end = off({"nmethod::_scopes_data_offset"});
    l.nm_scopes_data = l.nm_pcs_end;  // scopes data follow the pcs
  } else {
    l.nm_pcs_end = off({"nmethod::_dependencies_offset"});
    l.nm_scopes_data = off({"CompiledMethod::_scopes_data_begin", "nmethod::_scopes_data_begin"});
    l.nm_metadata = off({"nmethod::_metadata_offset"}, false);
  }
  l.nm_deopt_handler = off({"CompiledMethod::_deopt_handler_begin", "nmethod::_deopt_handler_offset"}, false);
  l.nm_orig_pc = off({"nmethod::_orig_pc_offset"}, false);
  l.nm_header_bytes = std::max(size("nmethod"), l.blob_header_bytes);
  l.pc_desc_size = size("PcDesc");
  l.pc_desc_pc = off({"PcDesc::_pc_offset"});
  l.pc_desc_scope = off({"PcDesc::_scope_decode_offset"});

  l.method_const = off({"Method::_constMethod"});
  l.method_access = off({"Method::_access_flags"});
  l.const_constants = off({"ConstMethod::_constants"});
  l.const_code_size = off({"ConstMethod::_code_size"});
  l.const_name_index = off({"ConstMethod::_name_index"});
  l.const_flags = off({"ConstMethod::_flags._flags", "ConstMethod::_flags"});
  l.const_flags_bytes = t.fields.count("ConstMethod::_flags._flags") ? 4 : 2;
  l.const_size = size("ConstMethod");
  l.const_has_linenumbers =
      static_cast<uint32_t>(constant({"ConstMethodFlags::_misc_has_linenumber_table", "ConstMethod::_has_linenumber_table"}, 1));
  l.pool_holder = off({"ConstantPool::_pool_holder"});
  l.pool_length = off({"ConstantPool::_length"});
  l.pool_source_file = off({"ConstantPool::_source_file_name_index"}, false);
  l.klass_source_file = off({"InstanceKlass::_source_file_name_index"}, false);
  l.pool_size = size("ConstantPool");
  l.klass_name = off({"Klass::_name"});
  l.symbol_length = off({"Symbol::_length"});
  l.symbol_body = off({"Symbol::_body[0]", "Symbol::_body"});

  l.list_length = off({"ThreadsList::_length"});
  l.list_threads = off({"ThreadsList::_threads"});
  l.thread_osthread = off({"JavaThread::_osthread", "Thread::_osthread"});
  l.thread_anchor = off({"JavaThread::_anchor"});
  l.thread_state = off({"JavaThread::_thread_state"});
  l.osthread_tid = off({"OSThread::_thread_id"});
  l.anchor_sp = off({"JavaFrameAnchor::_last_Java_sp"});
  l.anchor_pc = off({"JavaFrameAnchor::_last_Java_pc"});
  l.anchor_fp = off({"JavaFrameAnchor::_last_Java_fp"});
  l.wrapper_anchor = off({"JavaCallWrapper::_anchor"});

  // The interpreter's frame: the method slot is next below last_sp on every
  // port (x86_64, aarch64: -3); the bcp slot moved between releases and
  // ports, so the walker finds it by where it points (hotspot_frames.cpp).
  const int64_t port_default = arm64 ? -8 : 1;  // x86_64 exports it: 1 (not negative) if missing
  l.interp_sender_sp = static_cast<int32_t>(constant({"frame::interpreter_frame_sender_sp_offset"}, arm64 ? -1 : 1));
  int64_t last_sp = constant({"frame::interpreter_frame_last_sp_offset"}, arm64 ? -2 : 1);
  l.interp_method = static_cast<int32_t>(last_sp - 1);
  l.entry_call_wrapper = static_cast<int32_t>(constant({"frame::entry_frame_call_wrapper_offset"}, port_default));
  if ((l.interp_sender_sp >= 0 || last_sp >= 0 || l.entry_call_wrapper >= 0) && missing.empty())
    missing = "frame::interpreter_frame_* / entry_frame_call_wrapper_offset";
  l.state_blocked = static_cast<int32_t>(constant({"_thread_blocked"}, 10));
  l.state_blocked_trans = static_cast<int32_t>(constant({"_thread_blocked_trans"}, 11));
  l.state_in_vm = static_cast<int32_t>(constant({"_thread_in_vm"}, 6));
  l.state_in_vm_trans = static_cast<int32_t>(constant({"_thread_in_vm_trans"}, 7));
  l.state_in_native = static_cast<int32_t>(constant({"_thread_in_native"}, 4));
  l.state_in_java = static_cast<int32_t>(constant({"_thread_in_Java"}, 8));
  l.invocation_entry_bci = static_cast<int32_t>(constant({"InvocationEntryBci"}, -1));

  if (!missing.empty()) {
    if (why) *why = "HotSpot field " + missing + " not in gHotSpotVMStructs";
    return std::nullopt;
  }
  if (l.pc_desc_size < 8 || l.pc_desc_pc + 4 > l.pc_desc_size || l.pc_desc_scope + 4 > l.pc_desc_size ||
      l.heap_block_size > 64 || l.const_size > 256 || l.pool_size > 512 || l.blob_header_bytes > 4096 ||
      l.nm_header_bytes > 4096) {
    if (why) *why = "HotSpot tables inconsistent";
    return std::nullopt;
  }
  if (why) why->clear();
  return l;
}

}  // namespace jankbpf::runtime
