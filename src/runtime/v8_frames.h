// JavaScript frames of a V8 thread, from one sample: V8 keeps a frame
// pointer in every frame it builds, so the chain of saved frame pointers in
// the copied stack leads through them; a JS frame holds its JSFunction at
// fp + off_fp_function (where a typed frame -- entry, exit, stub -- holds a
// Smi marker at fp + off_fp_context_or_frame_type). The function's
// SharedFunctionInfo gives the name and its Script the file; those are heap
// objects, read from the live process right away (the ring thread), every
// one checked against its map before it is believed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/mem_reader.h"
#include "runtime/v8_layout.h"

namespace jankbpf::runtime {

struct JsFrame {
  // The return address into this frame's caller ([fp + 8]): the unwound
  // stack's next frame has it as its pc, which places this one.
  uint64_t caller_pc = 0;
  std::string name;  // "" anonymous
  std::string file;  // the script's name; "" none (V8's own builtins)
  // Where the function is defined (its parameter list): the frame's
  // current statement would need its code's position table. 0: unknown.
  uint32_t line = 0, column = 0;
  bool unreadable = false;  // looked like a JS frame, its objects could not be read
};

struct JsCapture {
  enum class Status : uint8_t { None, Ok, Late };
  Status status = Status::None;
  std::vector<JsFrame> frames;  // leaf first
  bool scanned = false;         // the chain was found by a scan, not at the frame pointer
  bool budget_cut = false;      // kMaxJsSourcePerWalk left some lines unread
  uint64_t read_ns = 0;
};

// The registers and stack copy of one sample.
struct NativeStack {
  uint64_t pc = 0, sp = 0, fp = 0;
  std::span<const uint8_t> stack;  // starts at sp
  uint64_t lr = 0;                 // arm64's link register (0: none, x86_64)
  // HotSpot's template interpreter keeps the current bytecode pointer in a
  // register (r13 on x86_64, x22 on arm64) and stores it in the frame only
  // at calls: the leaf interpreted frame's is here (0: not sampled).
  uint64_t interp_bcp = 0;
};

inline constexpr size_t kMaxJsFrames = 64;
inline constexpr size_t kMaxFpLinks = 256;
inline constexpr uint64_t kMaxScanBytes = 8192;  // searched for a chain when the frame pointer has none
inline constexpr size_t kMaxJsStringBytes = 256;
inline constexpr size_t kMaxJsSourceBytes = 4u << 20;  // sources read for line numbers, once per script
// Per process: decoded functions, scripts, and the line starts they hold
// (4 bytes each: at most 4 MB).
inline constexpr size_t kMaxCachedFunctions = 4096, kMaxCachedScripts = 1024, kMaxLineStarts = 1u << 20;
// Source bytes read in one walk (up to 64 new scripts of 4 MiB each would
// be 256 MiB on the ring thread): past it a frame keeps its name, and its
// line is read by a later walk.
inline constexpr size_t kMaxJsSourcePerWalk = 8u << 20;

class V8Walker {
 public:
  explicit V8Walker(const V8Layout& l) : l_(l) {}

  JsCapture walk(MemReader& mem, const NativeStack& s);

  size_t cached_functions() const { return sfi_cache_.size(); }
  // What the caches hold, roughly (line starts, names, entries).
  size_t held_bytes() const {
    return line_starts_held_ * sizeof(uint32_t) + script_cache_.size() * (kMaxJsStringBytes + sizeof(Script)) +
           sfi_cache_.size() * (2 * kMaxJsStringBytes + sizeof(Sfi));
  }
  void clear_caches() {
    sfi_cache_.clear();
    script_cache_.clear();
    line_starts_held_ = 0;
  }

 private:
  struct Sfi {
    uint64_t name_or_scope = 0, script = 0;  // what the entry was decoded from
    std::string name, file;
    uint32_t line = 0, column = 0;
  };
  struct Script {
    uint64_t name_obj = 0, source_obj = 0;  // what the entry was decoded from
    std::string name;
    std::vector<uint32_t> line_starts;  // source offsets where lines begin
    bool lines = false;                 // the source could be read
  };
  struct Candidate {
    uint64_t function = 0, caller_pc = 0;
    uint8_t fn[32]{};   // the JSFunction's first words
    uint8_t sfi[48]{};  // its SharedFunctionInfo's
  };
  std::vector<Candidate> chain(const NativeStack& s, uint64_t fp) const;
  bool looks_like_js(const NativeStack& s, uint64_t fp, uint64_t* ctx, uint64_t* fn) const;
  std::vector<JsFrame> frames(MemReader& mem, std::vector<Candidate>& cands);
  bool instance_type(MemReader& mem, uint64_t tagged, uint16_t* type);
  bool is_sfi_map(MemReader& mem, uint64_t map);
  const Sfi* decode(MemReader& mem, uint64_t sfi, uint64_t name_or_scope, uint64_t script);
  bool read_string(MemReader& mem, uint64_t tagged, std::string& out, size_t max, int depth = 0);
  void scope_info(MemReader& mem, uint64_t scope_info, std::string& name, int64_t& start);
  const Script* script(MemReader& mem, uint64_t script);

  V8Layout l_;
  uint64_t sfi_map_ = 0;  // the SharedFunctionInfo map, once seen (read-only space: it never moves)
  std::unordered_map<uint64_t, Sfi> sfi_cache_;          // SFI address -> decoded
  std::unordered_map<uint64_t, Script> script_cache_;  // Script address -> decoded
  size_t line_starts_held_ = 0;                         // in script_cache_
  size_t walk_source_bytes_ = 0;  // source bytes read by the current walk
  bool budget_cut_ = false;       // the current walk left a source unread
  Sfi sfi_scratch_;               // a function decoded without its line (not cached)
};

}  // namespace jankbpf::runtime
