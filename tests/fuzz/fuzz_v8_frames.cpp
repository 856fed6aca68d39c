// V8 frame decoding on memory and a stack a watched process controls: the
// input is split in two, the first part the copied stack (at kSp), the
// rest the heap (at kBase); bytes 0..7 are the frame pointer's offset into
// the stack. Every pointer, length, Smi and string in them may be anything:
// the walk must stay within its bounds and never read outside them.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "input_memory.h"
#include "runtime/v8_frames.h"
#include "runtime/v8_layout.h"

using namespace jankbpf::runtime;
using jankbpf::fuzz::InputMemory;

namespace {

constexpr uint64_t kBase = 0x10000, kSp = 0x7ffd00000000;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  uint64_t fp_off;
  std::memcpy(&fp_off, data, 8);
  data += 8;
  size -= 8;
  size_t split = std::min<size_t>(size / 2, 16384) & ~size_t{7};
  V8Layout l;  // Node 20's
  l.type_sfi = 262;
  l.type_script = 167;
  l.type_scope_info = 261;
  InputMemory heap(data + split, size - split, kBase, 2 * kMaxJsSourceBytes);
  V8Walker w(l);
  NativeStack s{0x1000, kSp, kSp + (fp_off % (split + 64)), {data, split}};
  for (int round = 0; round < 2; ++round) {  // the second walk runs on the caches
    JsCapture c = w.walk(heap, s);
    if (c.frames.size() > kMaxJsFrames) abort();
    for (const auto& f : c.frames) {
      if (f.name.size() > kMaxJsStringBytes || f.file.size() > kMaxJsStringBytes) abort();
      if (f.unreadable && (!f.name.empty() || f.line)) abort();
    }
  }
  return 0;
}
