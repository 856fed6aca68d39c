// V8's object and frame layout, as the binary that embeds it says: the
// `v8dbg_*` constants V8 exports for postmortem debuggers (Node.js builds
// have ~530 of them). Nothing here is per-version: a new Node is read with
// the constants it carries. Only the layout without pointer compression
// (8-byte tagged fields, 32-bit Smis in the upper half) is supported --
// that of Node's own builds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace jankbpf::runtime {

struct V8Layout {
  // Frames: offsets from the frame pointer.
  int64_t fp_function = -16, fp_context_or_type = -8, fp_bytecode_array = -32, fp_bytecode_offset = -40;
  // Tagging.
  uint64_t heap_tag = 1, heap_tag_mask = 3, smi_tag_mask = 1;
  // Fields, from the object's start (the tagged pointer minus heap_tag).
  uint32_t obj_map = 0, map_instance_type = 12;
  uint32_t fn_shared = 24;
  uint32_t sfi_name_or_scope = 16, sfi_script = 32, sfi_function_data = 8;
  uint32_t script_name = 16, script_source = 8, script_line_ends = 56;
  uint32_t str_length = 12, seq_chars = 16, cons_first = 16, cons_second = 24;
  uint32_t sliced_parent = 16, sliced_offset = 24, thin_actual = 16, ext_resource = 16;
  uint32_t fixed_array_length = 8, fixed_array_data = 16;
  uint32_t bytecode_source_positions = 0;  // 0: not known
  // ScopeInfo slots (tagged words after the map).
  uint32_t scope_nparams = 1, scope_ncontextlocals = 2, scope_first_vars = 3;
  // Instance types.
  uint16_t first_nonstring = 128, string_repr_mask = 7, string_enc_mask = 8, one_byte_tag = 8;
  uint16_t seq_tag = 0, cons_tag = 1, external_tag = 2, sliced_tag = 3, thin_tag = 5;
  uint16_t type_sfi = 0, type_script = 0, type_scope_info = 0, type_fixed_array = 0;
};

// The layout from a binary's v8dbg_* (name without the prefix, value)
// pairs; nullopt, with `why`, when one it needs is missing or the layout is
// not one this reader decodes (pointer compression, 32-bit).
std::optional<V8Layout> v8_layout_from(const std::vector<std::pair<std::string, int64_t>>& consts,
                                       std::string* why);

// Whether an exported name is one of V8's postmortem constants.
inline bool is_v8dbg_name(std::string_view n) { return n.starts_with("v8dbg_"); }

}  // namespace jankbpf::runtime
