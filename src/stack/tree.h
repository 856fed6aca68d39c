// Aggregation of sampled stacks into the stack-log tree of the HarmonyOS
// main-thread-jank seed, the heaviest stack, and the Firefox hang-ping
// modules table.
//
// Tree text, root = outermost frame, 4 spaces of indent per level:
//   COUNT #LEVEL pc PC PATH(SYMBOL+OFF)(BUILD_ID)      native frame
//   COUNT #LEVEL at FUNC (FILE:LINE:COL)               JIT frame (perf map)
//   COUNT #LEVEL at FUNC (FILE:LINE)                   runtime frame (Python)
//   COUNT #LEVEL at pkg.Class.method(File.java:LINE)   Java frame (HotSpot)
//   COUNT #LEVEL pc PC [kernel.kallsyms](SYMBOL+OFF)(BUILD_ID)
//   COUNT #LEVEL wait S (sleeping)                     off-CPU sample's state
// PC is the module offset (8 hex digits at least; absolute for kernel and
// unmapped frames), OFF is decimal as in the seed, (SYMBOL+OFF) or
// (BUILD_ID) are left out when unknown. Children are ordered by count.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "stack/stack.h"

namespace jankbpf::stack {

struct TreeOptions {
  // Which frames are "the same" at one position: the same pc (the seed),
  // or the same function (pcs inside one function merged; the first pc
  // seen is printed).
  enum class Merge { Pc, Function } merge = Merge::Pc;
  // Append " [FILE:LINE]" to native frames with line info.
  bool source_locations = false;
};

class StackTree {
 public:
  explicit StackTree(TreeOptions opts = {});
  ~StackTree();
  StackTree(StackTree&&) noexcept;
  StackTree& operator=(StackTree&&) noexcept;

  // `weight`: how many samples the stack stands for (an off-CPU capture
  // weighed by the time it slept; 1 for a sample).
  void add(const ResolvedStack& stack, uint32_t weight = 1);
  size_t samples() const { return samples_; }

  // The whole tree as text (one line per node, '\n'-terminated).
  std::string render() const;

  struct Line {
    int level = 0;
    uint32_t count = 0;
    const Frame* frame = nullptr;  // null for a wait-state line
    char wait_state = 0;
  };
  // Nodes in render order (depth first, children by count).
  std::vector<Line> lines() const;

  // The most-sampled path, leaf first; and as text, one "#NN ..." frame
  // per line. Walked on frames merged by function (so a hot loop spread
  // over many pcs counts as one place): from the root, go to the child with
  // the highest count while it holds more samples than end at this node.
  std::vector<Line> heaviest_path() const;
  std::string heaviest_stack() const;

  // What two reports of the same freeze share, for de-duplication: the
  // function-level path from the root that at least two thirds of the
  // samples agree on (module and symbol per frame; no pcs or offsets, which
  // differ from sample to sample). The heaviest path's leaf can flip between
  // a hot loop and the function it calls from one run to the next; the
  // agreed part does not. "" without samples.
  std::string fingerprint() const;

  // One frame in the tree's text form, without count and level.
  static std::string format_frame(const Frame& f, bool source_locations = false);

 private:
  struct Node;
  static void insert(Node* root, const ResolvedStack& stack, TreeOptions::Merge merge, uint32_t weight);
  std::unique_ptr<Node> root_;
  std::unique_ptr<Node> func_root_;  // by-function twin for heaviest_path()
  TreeOptions opts_;
  size_t samples_ = 0;
};

// Firefox-style module table: modules as [path, build_id], frames as
// [module_index, "HEXOFFSET"] (index -1 when not in a module, then the
// absolute address).
class ModuleTable {
 public:
  struct NativeFrame {
    int module = -1;
    std::string offset;  // upper-case hex, no 0x
  };
  // Index of the frame's module, adding it if new; -1 without a module.
  int index(const Frame& f);
  // One entry per distinct pc of the stack (inlined frames fold into the
  // frame holding them), leaf first.
  std::vector<NativeFrame> frames(const ResolvedStack& s);
  const std::vector<std::pair<std::string, std::string>>& modules() const { return modules_; }

 private:
  std::vector<std::pair<std::string, std::string>> modules_;
  std::unordered_map<std::string, int> index_;
};

}  // namespace jankbpf::stack
