#include "runtime/v8_layout.h"

#include <unordered_map>

namespace jankbpf::runtime {

std::optional<V8Layout> v8_layout_from(const std::vector<std::pair<std::string, int64_t>>& consts,
                                       std::string* why) {
  std::unordered_map<std::string_view, int64_t> c;
  for (const auto& [k, v] : consts) c.emplace(k, v);
  std::string missing;
  auto get = [&](std::string_view k) -> int64_t {
    auto it = c.find(k);
    if (it != c.end()) return it->second;
    if (missing.empty()) missing = std::string(k);
    return 0;
  };
  // Present in every V8 that exports constants at all; zero-valued ones
  // live in .bss and are read as 0 like the others.
  int64_t ptr = get("SystemPointerSize");
  int64_t smi_shift = get("SmiShiftSize");
  V8Layout l;
  l.fp_function = get("off_fp_function");
  l.fp_context_or_type = get("off_fp_context_or_frame_type");
  l.fp_bytecode_array = get("off_fp_bytecode_array");
  l.fp_bytecode_offset = get("off_fp_bytecode_offset");
  l.heap_tag = static_cast<uint64_t>(get("HeapObjectTag"));
  l.heap_tag_mask = static_cast<uint64_t>(get("HeapObjectTagMask"));
  l.smi_tag_mask = static_cast<uint64_t>(get("SmiTagMask"));
  auto u32 = [&](std::string_view k) { return static_cast<uint32_t>(get(k)); };
  auto u16 = [&](std::string_view k) { return static_cast<uint16_t>(get(k)); };
  l.obj_map = u32("class_HeapObject__map__Map");
  l.map_instance_type = u32("class_Map__instance_type__uint16_t");
  l.fn_shared = u32("class_JSFunction__shared__SharedFunctionInfo");
  l.sfi_name_or_scope = u32("class_SharedFunctionInfo__name_or_scope_info__Object");
  l.sfi_script = u32("class_SharedFunctionInfo__script_or_debug_info__HeapObject");
  l.sfi_function_data = u32("class_SharedFunctionInfo__function_data__Object");
  l.script_name = u32("class_Script__name__Object");
  l.script_source = u32("class_Script__source__Object");
  l.script_line_ends = u32("class_Script__line_ends__Object");
  l.str_length = u32("class_String__length__int32_t");
  l.seq_chars = u32("class_SeqOneByteString__chars__char");
  l.cons_first = u32("class_ConsString__first__String");
  l.cons_second = u32("class_ConsString__second__String");
  l.sliced_parent = u32("class_SlicedString__parent__String");
  l.sliced_offset = u32("class_SlicedString__offset__SMI");
  l.thin_actual = u32("class_ThinString__actual__String");
  l.ext_resource = u32("class_ExternalString__resource__Object");
  l.fixed_array_length = u32("class_FixedArrayBase__length__SMI");
  l.fixed_array_data = u32("class_FixedArray__data__uintptr_t");
  l.scope_nparams = u32("scopeinfo_idx_nparams");
  l.scope_ncontextlocals = u32("scopeinfo_idx_ncontextlocals");
  l.scope_first_vars = u32("scopeinfo_idx_first_vars");
  l.first_nonstring = u16("FirstNonstringType");
  l.string_repr_mask = u16("StringRepresentationMask");
  l.string_enc_mask = u16("StringEncodingMask");
  l.one_byte_tag = u16("OneByteStringTag");
  l.seq_tag = u16("SeqStringTag");
  l.cons_tag = u16("ConsStringTag");
  l.external_tag = u16("ExternalStringTag");
  l.sliced_tag = u16("SlicedStringTag");
  l.thin_tag = u16("ThinStringTag");
  l.type_sfi = u16("type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE");
  l.type_script = u16("type_Script__SCRIPT_TYPE");
  l.type_scope_info = u16("type_ScopeInfo__SCOPE_INFO_TYPE");
  l.type_fixed_array = u16("type_FixedArray__FIXED_ARRAY_TYPE");
  if (!missing.empty()) {
    if (why) *why = "V8 constant v8dbg_" + missing + " missing";
    return std::nullopt;
  }
  if (ptr != 8 || smi_shift != 31) {
    if (why)
      *why = "V8 with pointer compression or 32-bit pointers (SystemPointerSize " + std::to_string(ptr) +
             ", SmiShiftSize " + std::to_string(smi_shift) + "): frames are read for 64-bit V8 without it";
    return std::nullopt;
  }
  if (l.heap_tag_mask == 0 || (l.heap_tag & ~l.heap_tag_mask) != 0 || l.fp_function >= 0 ||
      l.fp_context_or_type >= 0 || l.type_sfi == 0 || l.type_script == 0) {
    if (why) *why = "V8 constants inconsistent";
    return std::nullopt;
  }
  if (why) why->clear();
  return l;
}

}  // namespace jankbpf::runtime
