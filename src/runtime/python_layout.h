// Where CPython keeps what a stack walk needs, per minor version: byte
// offsets into _PyRuntimeState, PyInterpreterState, PyThreadState,
// _PyInterpreterFrame, PyCodeObject and the compact PyUnicode layout. The
// walker (python_frames.h) reads nothing but these numbers, so a new
// version is one table entry (learned from that version's
// Include/internal/pycore_*.h and checked with offsetof), not new code.
#pragma once

#include <cstdint>
#include <string>

namespace jankbpf::runtime {

inline constexpr uint32_t kNoField = 0xffffffffu;

// How the frames one _PyEval_EvalFrameDefault call runs are delimited.
enum class EntryRule : uint8_t {
  IsEntryFlag,  // 3.11: the outermost frame of an eval call has is_entry set
  ShimFrame,    // 3.12: each eval call pushes a shim frame owned by the C stack
};

struct PythonLayout {
  const char* version;  // "3.11"
  uint32_t major, minor;
  // _PyRuntimeState
  uint32_t runtime_interp_head;  // interpreters.head
  // PyInterpreterState
  uint32_t interp_next, interp_threads_head;
  // PyThreadState
  uint32_t tstate_next, tstate_native_thread_id;
  uint32_t tstate_cframe;           // PyThreadState.cframe (kNoField: current_frame is in tstate)
  uint32_t cframe_current_frame;    // in _PyCFrame, or in PyThreadState without a cframe
  uint32_t tstate_size;             // bytes read to cover the fields above
  // _PyInterpreterFrame
  uint32_t frame_code, frame_previous, frame_prev_instr, frame_owner;
  uint32_t frame_is_entry;  // kNoField unless EntryRule::IsEntryFlag
  uint32_t frame_size;
  EntryRule entry;
  uint8_t owner_cstack;  // FRAME_OWNED_BY_CSTACK (ShimFrame)
  // PyCodeObject
  uint32_t code_filename, code_name, code_qualname, code_firstlineno, code_linetable;
  uint32_t code_adaptive;  // co_code_adaptive: the first code unit; also the bytes read
  // PyASCIIObject / PyCompactUnicodeObject: data follows the struct.
  uint32_t unicode_length, unicode_state, ascii_size, compact_size;
  // PyBytesObject (co_linetable)
  uint32_t bytes_size, bytes_data;
};

// Common object header (stable since 3.0): PyObject.ob_type.
inline constexpr uint32_t kObType = 8;

// The layout for a PY_VERSION_HEX (the value of the `Py_Version` symbol,
// 3.11+), or nullptr for a version without one.
const PythonLayout* python_layout(uint64_t version_hex);
// "3.11.7" from a PY_VERSION_HEX.
std::string python_version_text(uint64_t version_hex);
// The versions the table covers, for messages: "3.11, 3.12".
std::string python_supported_versions();

}  // namespace jankbpf::runtime
