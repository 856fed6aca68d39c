// CPython frame decoding on memory a watched process controls: the input
// is the process's memory. Byte 0 picks the layout (3.11 / 3.12) and
// whether object types are checked, bytes 1..8 the thread id; the rest is
// mapped at kBase, where _PyRuntime is. Every pointer, length, string and
// location table in it may be anything: the walk must stay within its
// bounds and never read outside the fake memory.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "input_memory.h"
#include "runtime/python_frames.h"
#include "runtime/python_layout.h"

using namespace jankbpf::runtime;
using jankbpf::fuzz::InputMemory;

namespace {

constexpr uint64_t kBase = 0x10000;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  const PythonLayout* l = python_layout((data[0] & 1) ? 0x030C01F0 : 0x030B07F0);
  PythonTarget t;
  t.layout = l;
  t.runtime = kBase;
  if (data[0] & 2) {  // types checked: at fixed addresses inside the input
    t.code_type = kBase + 8;
    t.unicode_type = kBase + 16;
    t.bytes_type = kBase + 24;
  }
  uint64_t tid;
  std::memcpy(&tid, data + 1, 8);
  InputMemory mem(data + 9, size - 9, kBase, 64u << 10);  // every read the walker makes is bounded
  PythonWalker w(t);
  for (int round = 0; round < 2; ++round) {  // the second walk runs on the caches
    PyCapture c = w.walk(mem, tid);
    if (c.frames.size() > kMaxPyFrames) abort();
    for (const auto& f : c.frames) {
      if (f.name.size() > 4 * kMaxPyStringBytes + 3 || f.file.size() > 4 * kMaxPyStringBytes + 3) abort();
      if (f.unreadable && (!f.name.empty() || f.line)) abort();
    }
  }
  // The location table decoder on raw bytes.
  (void)python_line({data + 9, size - 9}, static_cast<int32_t>(tid), static_cast<int64_t>(tid >> 32));
  return 0;
}
