// Java frames of a HotSpot thread, from one sample. HotSpot's compiled
// code keeps no frame pointer (without -XX:+PreserveFramePointer), so the
// walk is HotSpot's own: the code blob at each pc (found through the code
// cache's segment map) says what the frame is -- the interpreter (Method*
// and bcp in the frame's slots, the frame pointer chain), an nmethod (its
// frame size; the pc's PcDesc and scopes give the method, the bci and the
// methods inlined there), a stub or adapter (named by its blob), or the
// call stub where Java was entered from C++ (the JavaCallWrapper's anchor
// leads to the Java frames that called into the VM before). A sample whose
// pc is outside the code cache (native code, the VM, the kernel) starts at
// the thread's last Java frame (JavaThread::_anchor).
//
// Every offset comes from the JVM's own tables (hotspot_layout.h). Every
// read is bounded; caches are keyed by the code blob's identity (its
// address and compile id) and by Method*, each re-checked on every sample
// so that code unloaded and memory reused is decoded anew, never believed.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/hotspot_layout.h"
#include "runtime/mem_reader.h"
#include "runtime/v8_frames.h"

namespace jankbpf::runtime {

struct JavaFrame {
  enum class Kind : uint8_t { Interpreted, Compiled, Inlined, Native, Stub, Unreadable };
  Kind kind = Kind::Unreadable;
  std::string name;  // "pkg.Class.method"; a stub's blob name
  std::string file;  // "File.java"; "" unknown
  uint32_t line = 0;  // 0: unknown
  int32_t bci = -1;   // -1: unknown
  bool jit = false;   // in compiled code (an nmethod, a stub), not the interpreter
};

// Java frames between two stretches of native code: from the innermost
// frame of a Java call (the sample's pc, or the thread's last Java frame)
// to the call stub that entered it.
struct JavaSegment {
  // The code blob of the innermost frame, where the native stack enters
  // this segment (its return address lies in it).
  uint64_t blob_lo = 0, blob_hi = 0;
  // The return address from the call stub into the C++ that called Java
  // (JavaCalls::call_helper): where the native stack goes on. 0: not known.
  uint64_t exit_pc = 0;
  std::vector<JavaFrame> frames;  // leaf first
  bool cut = false;               // the walk could not go past the last frame
};

// What the JVM was doing at the read, for telling its own pauses apart.
struct JvmState {
  bool known = false;
  int32_t thread_state = -1;  // JavaThread::_thread_state (-1: not read)
  bool blocked = false;       // _thread_blocked(_trans)
  bool safepoint = false;     // SafepointSynchronize::_state synchronizing or synchronized
  std::string operation;      // the VM thread's current operation ("G1CollectForAllocation"), "" none
};

struct JavaCapture {
  enum class Status : uint8_t { None, Ok, NoThread, Unreadable, Late };
  Status status = Status::None;
  std::vector<JavaSegment> segments;  // innermost first
  uint64_t code_lo = 0, code_hi = 0;  // the code cache: native frames there are Java's
  JvmState jvm;
  uint64_t read_ns = 0;
  size_t frames() const {
    size_t n = 0;
    for (const auto& s : segments) n += s.frames.size();
    return n;
  }
};

// Optional addresses from libjvm's full symbol table (not in the exported
// tables): the safepoint state and the VM thread's current operation, and
// the vtables of VM operations (their class names).
struct JvmSymbols {
  uint64_t safepoint_state = 0;   // &SafepointSynchronize::_state
  uint64_t cur_vm_operation = 0;  // &VMThread::_cur_vm_operation
  std::vector<std::pair<uint64_t, std::string>> vm_op_vtables;  // sorted: vtable address -> "VM_..."
};

inline constexpr size_t kMaxJavaFrames = 256;       // logical frames a capture holds
inline constexpr size_t kMaxJavaPhysical = 192;     // physical frames walked
inline constexpr size_t kMaxJavaSegments = 16;
inline constexpr size_t kMaxJavaThreads = 16384;
inline constexpr size_t kMaxStackReadBytes = 256 << 10;  // stack read live beyond the sample's copy
inline constexpr size_t kMaxSegmapHops = 4096;
inline constexpr size_t kMaxPcDescBytes = 512 << 10;
inline constexpr size_t kMaxInlineDepth = 32;
inline constexpr size_t kMaxLeafScanBytes = 4096;  // searched for a return into compiled code
inline constexpr size_t kMaxJavaNameBytes = 512;
inline constexpr size_t kMaxLineTableBytes = 64 << 10;
// Per process.
inline constexpr size_t kMaxCachedBlobs = 16384, kMaxCachedMethods = 65536, kMaxCachedLinePairs = 4u << 20;
inline constexpr size_t kMaxScopesPerBlob = 256;

// A method's line number table, decoded (HotSpot's compressed stream).
// Returns (bci, line) pairs in stream order; false when the stream is
// damaged (never more than `max_pairs`).
// `excluded`: as read_unsigned5 (the escape's numbers). `used`: the bytes
// up to and with the terminator.
bool decode_line_table(std::span<const uint8_t> stream, uint8_t excluded,
                       std::vector<std::pair<uint32_t, uint32_t>>& out, size_t max_pairs, size_t* used = nullptr);
// The line of `bci` from decoded pairs, as Method::line_number_from_bci:
// the exact bci's line, else that of the greatest bci below it; 0 none.
uint32_t java_line(const std::vector<std::pair<uint32_t, uint32_t>>& pairs, int32_t bci);

// One UNSIGNED5 number (CompressedReadStream::read_int); `excluded` is 1
// from JDK 20 on (null bytes excluded from the encoding), 0 before.
bool read_unsigned5(std::span<const uint8_t> s, size_t& pos, uint32_t& out, uint8_t excluded);

class HotSpotWalker {
 public:
  HotSpotWalker(const HotSpotLayout& l, JvmSymbols syms, bool arm64)
      : l_(l), syms_(std::move(syms)), arm64_(arm64) {}

  // The Java frames thread `tid` (its number in the process's own pid
  // namespace) runs at the sample `s` (registers and stack copy; lr used
  // on arm64).
  JavaCapture walk(MemReader& mem, uint64_t tid, const NativeStack& s);

  size_t cached_blobs() const { return blobs_.size(); }
  size_t cached_methods() const { return methods_.size(); }

  struct Blob;
  struct Method;

 private:
  struct Physical;
  struct Walk;
  bool init(MemReader& mem);
  const Blob* blob_at(MemReader& mem, Walk& w, uint64_t pc);
  const Blob* read_blob(MemReader& mem, uint64_t start);
  bool in_interpreter(uint64_t pc) const { return pc >= interp_lo_ && pc < interp_hi_; }
  void walk_segment(MemReader& mem, Walk& w, uint64_t pc, uint64_t sp, uint64_t fp, uint64_t lr, bool leaf,
                    JavaCapture& out);
  bool plausible_return(MemReader& mem, Walk& w, uint64_t ret);
  const std::vector<std::pair<uint64_t, int32_t>>* scopes(MemReader& mem, Blob& b, uint64_t pc, bool exact);
  const Method* method(MemReader& mem, uint64_t m);
  bool read_symbol(MemReader& mem, uint64_t sym, std::string& out);
  bool find_thread(MemReader& mem, uint64_t tid, uint64_t* thread);
  void read_jvm_state(MemReader& mem, uint64_t thread, JvmState& st);
  void name_frames(MemReader& mem, Walk& w, JavaCapture& out);

  HotSpotLayout l_;
  JvmSymbols syms_;
  bool arm64_;
  bool ready_ = false;
  uint8_t excluded_ = 0;  // UNSIGNED5's excluded bytes (JDK 20+: 1)
  uint64_t code_lo_ = 0, code_hi_ = 0, interp_lo_ = 0, interp_hi_ = 0, call_stub_ret_ = 0;
  struct Heap {
    uint64_t lo = 0, hi = 0, segmap = 0;
    uint32_t log2_segment = 0;
  };
  std::vector<Heap> heaps_;
  int bcp_slot_ = 0;  // learned: the interpreter frame's bcp slot (words from fp), 0 unknown
  std::map<uint64_t, Blob> blobs_;  // by start address
  std::unordered_map<uint64_t, Method> methods_;  // by Method*
  size_t line_pairs_held_ = 0;
  std::unordered_map<uint64_t, uint64_t> threads_;  // tid -> JavaThread*
  std::unordered_map<uint64_t, std::string> blob_names_;  // name pointer -> name
};

struct HotSpotWalker::Blob {
  uint64_t start = 0, end = 0;  // [start, start + _size)
  uint64_t code_begin = 0, code_end = 0;
  uint64_t name_ptr = 0;
  int32_t frame_size = 0;       // words
  int32_t frame_complete = -1;  // from code_begin (-1: none)
  bool nmethod = false, native = false;
  int32_t compile_id = 0;
  uint64_t method = 0;  // nmethod's Method*
  uint64_t pcs_lo = 0, pcs_hi = 0, scopes_data = 0, metadata = 0;  // 0: not known
  uint64_t deopt_handler = 0;
  int32_t orig_pc_offset = -1;
  std::string name;
  // pc -> (Method*, bci), innermost first; decoded from the scopes.
  std::unordered_map<uint64_t, std::vector<std::pair<uint64_t, int32_t>>> scope_cache;
};

struct HotSpotWalker::Method {
  uint64_t const_method = 0;  // what the entry was decoded from
  uint64_t code_base = 0;     // the bytecodes
  uint32_t code_size = 0;
  bool native = false;
  std::string name, file;
  std::vector<std::pair<uint32_t, uint32_t>> lines;  // (bci, line)
};

}  // namespace jankbpf::runtime
