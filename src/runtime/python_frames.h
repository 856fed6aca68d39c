// Walks one thread's CPython frame chain in another process's memory:
// _PyRuntime -> interpreters -> thread states (matched by native thread
// id) -> the current _PyInterpreterFrame -> previous ... Every read is
// bounded (frames, string bytes, line-table bytes) and every object is
// checked against its type's address, so a torn or reused object is
// reported as unreadable, never decoded as something else.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/mem_reader.h"
#include "runtime/python_layout.h"

namespace jankbpf::runtime {

// What discovery found in a process (addresses in its address space).
struct PythonTarget {
  const PythonLayout* layout = nullptr;
  uint64_t version_hex = 0;  // Py_Version
  uint64_t runtime = 0;      // &_PyRuntime
  // &PyCode_Type, &PyUnicode_Type, &PyBytes_Type: objects whose ob_type is
  // not the expected one are refused (0: not checked).
  uint64_t code_type = 0, unicode_type = 0, bytes_type = 0;
};

struct PyFrame {
  std::string name;  // co_qualname
  std::string file;  // co_filename
  uint32_t line = 0;  // 0: unknown
  bool entry = false;       // outermost frame of one _PyEval_EvalFrameDefault call
  bool unreadable = false;  // the frame or its code object could not be read
};

struct PyCapture {
  enum class Status : uint8_t {
    None,        // not captured (not a Python process, or not known yet)
    Ok,          // frames read (possibly none: no Python code running)
    NoThread,    // no thread state for this thread (not a Python thread)
    Unreadable,  // the runtime or thread state could not be read
    Late,        // not read: the sample arrived too long after it was taken
  };
  Status status = Status::None;
  std::vector<PyFrame> frames;  // leaf first
  bool truncated = false;       // stopped at the frame cap
  bool cut = false;             // the chain broke at an unreadable frame (the last one)
  bool budget_cut = false;      // a budget left lines unread (kMaxPyLineBytesPerWalk, the cache's)
  uint64_t read_ns = 0;         // CLOCK_MONOTONIC when the read ended
};

// Limits of one walk.
inline constexpr size_t kMaxPyFrames = 128;
inline constexpr size_t kMaxPyStringBytes = 512;
inline constexpr size_t kMaxPyLineTable = 64 << 10;
inline constexpr size_t kMaxPyThreads = 1024;
// Line-table bytes read in one walk (issue 26: 8,100 code objects sharing
// one 64 KiB table were read, and kept, 8,100 times): past it, frames keep
// their names and lose their lines until a later walk reads them.
inline constexpr size_t kMaxPyLineBytesPerWalk = 1u << 20;
// Bytes a process's decoded code objects may hold (names, files, the line
// tables, each table once however many code objects share it).
inline constexpr size_t kMaxPyCacheBytes = 4u << 20;

// The source line of code unit `unit` (an index into co_code_adaptive) from
// a 3.11/3.12 location table (co_linetable), starting at co_firstlineno.
// 0 when the table does not cover it or says "no line".
uint32_t python_line(std::span<const uint8_t> linetable, int32_t firstlineno, int64_t unit);

class PythonWalker {
 public:
  explicit PythonWalker(const PythonTarget& t) : t_(t) {}
  const PythonTarget& target() const { return t_; }

  // The frames thread `native_tid` (as the process's own pid namespace
  // numbers it) runs now.
  PyCapture walk(MemReader& mem, uint64_t native_tid);

  size_t cached_code_objects() const { return code_cache_.size(); }
  // What the caches hold, roughly (strings, tables, entries).
  size_t held_bytes() const { return held_; }
  void clear_caches();

 private:
  struct Code {
    // What identifies the object the cache entry was decoded from: a code
    // object freed and another allocated at its address differs here.
    uint64_t name_ptr = 0, qualname_ptr = 0, file_ptr = 0, linetable_ptr = 0;
    int32_t firstlineno = 0;
    std::string name, file;
    std::shared_ptr<const std::vector<uint8_t>> linetable;  // shared by the code objects that share it
    bool table_pending = false;  // not read yet (the walk's budget): read by a later walk
  };
  uint64_t find_thread(MemReader& mem, uint64_t native_tid, std::vector<uint8_t>& ts);
  // The decoded code object at addr whose header (co_code_adaptive bytes) is hdr.
  const Code* code(MemReader& mem, uint64_t addr, const std::vector<uint8_t>& hdr);
  bool read_string(MemReader& mem, uint64_t addr, std::string& out);
  // The line table at addr, from the table cache or read (within the walk's budget).
  std::shared_ptr<const std::vector<uint8_t>> table(MemReader& mem, uint64_t addr, bool* over_budget);

  PythonTarget t_;
  std::unordered_map<uint64_t, uint64_t> thread_cache_;  // native tid -> PyThreadState*
  std::unordered_map<uint64_t, Code> code_cache_;        // code object address -> decoded
  std::unordered_map<uint64_t, std::shared_ptr<const std::vector<uint8_t>>> tables_;  // bytes object -> contents
  size_t held_ = 0;           // bytes in the two caches
  size_t walk_table_bytes_ = 0;  // line-table bytes read by the current walk
  bool budget_cut_ = false;      // the current walk left something out for a budget
};

}  // namespace jankbpf::runtime
