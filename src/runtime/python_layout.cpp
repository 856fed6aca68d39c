#include "runtime/python_layout.h"

#include <cstdio>
#include <iterator>

namespace jankbpf::runtime {
namespace {

// Offsets as offsetof() gives them for x86_64 and aarch64 (LP64) builds of
// each version's headers with Py_BUILD_CORE; release builds (no
// Py_TRACE_REFS, whose extra object header would shift every field).
constexpr PythonLayout kLayouts[] = {
    {
        .version = "3.11", .major = 3, .minor = 11,
        .runtime_interp_head = 40,
        .interp_next = 0, .interp_threads_head = 16,
        .tstate_next = 8, .tstate_native_thread_id = 160,
        .tstate_cframe = 56, .cframe_current_frame = 8, .tstate_size = 168,
        .frame_code = 32, .frame_previous = 48, .frame_prev_instr = 56, .frame_owner = 69,
        .frame_is_entry = 68, .frame_size = 72,
        .entry = EntryRule::IsEntryFlag, .owner_cstack = 3,
        .code_filename = 112, .code_name = 120, .code_qualname = 128, .code_firstlineno = 72,
        .code_linetable = 136, .code_adaptive = 184,
        .unicode_length = 16, .unicode_state = 32, .ascii_size = 48, .compact_size = 72,
        .bytes_size = 16, .bytes_data = 32,
    },
    {
        // 3.12: f_code first, no is_entry (shim frames instead), no wstr in
        // the unicode header, co_firstlineno moved up by 4.
        .version = "3.12", .major = 3, .minor = 12,
        .runtime_interp_head = 40,
        .interp_next = 0, .interp_threads_head = 72,
        .tstate_next = 8, .tstate_native_thread_id = 144,
        .tstate_cframe = 56, .cframe_current_frame = 0, .tstate_size = 152,
        .frame_code = 0, .frame_previous = 8, .frame_prev_instr = 56, .frame_owner = 70,
        .frame_is_entry = kNoField, .frame_size = 72,
        .entry = EntryRule::ShimFrame, .owner_cstack = 3,
        .code_filename = 112, .code_name = 120, .code_qualname = 128, .code_firstlineno = 68,
        .code_linetable = 136, .code_adaptive = 192,
        .unicode_length = 16, .unicode_state = 32, .ascii_size = 40, .compact_size = 56,
        .bytes_size = 16, .bytes_data = 32,
    },
};

}  // namespace

const PythonLayout* python_layout(uint64_t version_hex) {
  uint32_t major = (version_hex >> 24) & 0xff, minor = (version_hex >> 16) & 0xff;
  for (const auto& l : kLayouts)
    if (l.major == major && l.minor == minor) return &l;
  return nullptr;
}

std::string python_version_text(uint64_t version_hex) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%u.%u.%u", unsigned((version_hex >> 24) & 0xff),
                unsigned((version_hex >> 16) & 0xff), unsigned((version_hex >> 8) & 0xff));
  return buf;
}

std::string python_supported_versions() {
  std::string s;
  for (const auto& l : kLayouts) s += (s.empty() ? "" : ", ") + std::string(l.version);
  return s;
}

}  // namespace jankbpf::runtime
