#include "stack/tree.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "util/log.h"

namespace jankbpf::stack {

struct StackTree::Node {
  Frame frame;
  char wait_state = 0;
  uint32_t count = 0;
  uint32_t order = 0;  // first-seen order among siblings
  std::vector<std::unique_ptr<Node>> children;
};

namespace {

// What makes two frames one node of the tree, by the form of frame: a
// kernel frame by function when merged, else by pc; an interpreter's by
// name and file (and line unless merged); a named JIT frame by name, file,
// line and column; an unmapped one by pc; a module's by module, build-id,
// function, inlining, and offset unless merged by function. Compared in
// place: building a string key per frame per sample was most of insert().
enum class FrameForm : uint8_t { KernelSym, KernelPc, Runtime, JitNamed, Unmapped, Module };

FrameForm form_of(const Frame& f, TreeOptions::Merge merge) {
  const bool by_fn = merge == TreeOptions::Merge::Function;
  if (f.kernel()) return by_fn && !f.symbol.empty() ? FrameForm::KernelSym : FrameForm::KernelPc;
  if (f.is_runtime()) return FrameForm::Runtime;
  if (f.jit() && !f.symbol.empty()) return FrameForm::JitNamed;
  if (!f.has_module()) return FrameForm::Unmapped;
  return FrameForm::Module;
}

bool same_node(const Frame& a, const Frame& b, TreeOptions::Merge merge) {
  const FrameForm fa = form_of(a, merge);
  if (fa != form_of(b, merge)) return false;
  const bool by_fn = merge == TreeOptions::Merge::Function;
  switch (fa) {
    case FrameForm::KernelSym:
      return a.symbol == b.symbol && a.module == b.module;
    case FrameForm::KernelPc:
      return a.pc == b.pc;
    case FrameForm::Runtime:
      return (by_fn || a.line == b.line) && a.symbol == b.symbol && a.file == b.file && a.runtime == b.runtime;
    case FrameForm::JitNamed:
      return a.line == b.line && a.column == b.column && a.symbol == b.symbol && a.file == b.file;
    case FrameForm::Unmapped:
      return a.pc == b.pc && a.jit() == b.jit();
    case FrameForm::Module:
      if (!(by_fn && !a.symbol.empty()) && a.module_offset != b.module_offset) return false;
      return a.inlined() == b.inlined() && a.symbol == b.symbol && a.module == b.module && a.build_id == b.build_id;
  }
  return false;
}

std::string wait_text(char state) {
  std::string s = "wait ";
  s += log::escape_control(std::string_view(&state, 1));
  s += " (";
  s += wait_state_name(state);
  s += ")";
  return s;
}

}  // namespace

StackTree::StackTree(TreeOptions opts)
    : root_(std::make_unique<Node>()), func_root_(std::make_unique<Node>()), opts_(opts) {}
StackTree::~StackTree() = default;
StackTree::StackTree(StackTree&&) noexcept = default;
StackTree& StackTree::operator=(StackTree&&) noexcept = default;

void StackTree::add(const ResolvedStack& stack, uint32_t weight) {
  if (weight == 0) return;
  samples_ += weight;
  insert(root_.get(), stack, opts_.merge, weight);
  if (opts_.merge != TreeOptions::Merge::Function) insert(func_root_.get(), stack, TreeOptions::Merge::Function, weight);
}

void StackTree::insert(Node* root, const ResolvedStack& stack, TreeOptions::Merge merge, uint32_t weight) {
  root->count += weight;
  Node* cur = root;
  // Children are few (the callees seen at one place): a scan beats a map.
  auto step = [&](const Frame* f, char wait) {
    Node* next = nullptr;
    for (auto& c : cur->children)
      if (f ? c->wait_state == 0 && same_node(c->frame, *f, merge) : c->wait_state == wait) {
        next = c.get();
        break;
      }
    if (!next) {
      auto n = std::make_unique<Node>();
      if (f) n->frame = *f;
      n->wait_state = wait;
      n->order = static_cast<uint32_t>(cur->children.size());
      next = n.get();
      cur->children.push_back(std::move(n));
    }
    next->count += weight;
    cur = next;
  };
  for (auto it = stack.frames.rbegin(); it != stack.frames.rend(); ++it) step(&*it, 0);
  if (stack.wait_state) step(nullptr, stack.wait_state);
}

std::string StackTree::format_frame(const Frame& f, bool source_locations) {
  char buf[64];
  std::string s;
  if (f.runtime == "java") {  // as a Java stack trace prints it: "at pkg.Class.method(File.java:42)"
    if (f.symbol.empty() || f.symbol.front() == '[') return "at " + f.symbol;
    s = "at " + f.symbol + "(" + (f.file.empty() ? "Unknown Source" : f.file);
    if (f.line && !f.file.empty()) s += ":" + std::to_string(f.line);
    return s + ")";
  }
  if ((f.jit() || f.is_runtime()) && !f.symbol.empty()) {
    s = "at " + f.symbol;
    if (!f.file.empty()) {
      s += " (" + f.file;
      if (f.line) {
        std::snprintf(buf, sizeof buf, ":%u", f.line);
        s += buf;
        if (f.column) {
          std::snprintf(buf, sizeof buf, ":%u", f.column);
          s += buf;
        }
      }
      s += ")";
    }
    return s;
  }
  bool absolute = f.kernel() || !f.has_module();
  std::snprintf(buf, sizeof buf, absolute ? "pc %016" PRIx64 " " : "pc %08" PRIx64 " ",
                absolute ? f.pc : f.module_offset);
  s = buf;
  if (!f.has_module()) {
    s += f.jit() ? "[jit]" : "[unknown]";
    return s;
  }
  s += f.module;
  if (!f.symbol.empty()) {
    s += "(" + f.symbol;
    if (!f.inlined()) {
      std::snprintf(buf, sizeof buf, "+%" PRIu64, f.symbol_offset);
      s += buf;
    }
    s += ")";
  }
  if (!f.build_id.empty()) s += "(" + f.build_id + ")";
  if (source_locations && !f.file.empty()) {
    std::snprintf(buf, sizeof buf, ":%u", f.line);
    s += " [" + f.file + buf + "]";
  }
  return s;
}

std::vector<StackTree::Line> StackTree::lines() const {
  std::vector<Line> out;
  auto sorted = [](const Node& n) {
    std::vector<const Node*> v;
    v.reserve(n.children.size());
    for (const auto& c : n.children) v.push_back(c.get());
    std::stable_sort(v.begin(), v.end(), [](const Node* a, const Node* b) {
      return a->count != b->count ? a->count > b->count : a->order < b->order;
    });
    return v;
  };
  // Iterative depth-first walk: stacks can be deep.
  std::vector<std::pair<const Node*, int>> todo;
  auto kids = sorted(*root_);
  for (auto it = kids.rbegin(); it != kids.rend(); ++it) todo.push_back({*it, 0});
  while (!todo.empty()) {
    auto [n, level] = todo.back();
    todo.pop_back();
    out.push_back({level, n->count, n->wait_state ? nullptr : &n->frame, n->wait_state});
    auto ch = sorted(*n);
    for (auto it = ch.rbegin(); it != ch.rend(); ++it) todo.push_back({*it, level + 1});
  }
  return out;
}

std::string StackTree::render() const {
  std::string out;
  char buf[32];
  for (const Line& l : lines()) {
    out.append(static_cast<size_t>(l.level) * 4, ' ');
    std::snprintf(buf, sizeof buf, "%u #%02d ", l.count, l.level);
    out += buf;
    // Names are the process's bytes: one frame must stay one line.
    out += l.frame ? log::escape_control(format_frame(*l.frame, opts_.source_locations)) : wait_text(l.wait_state);
    out += '\n';
  }
  return out;
}

std::vector<StackTree::Line> StackTree::heaviest_path() const {
  std::vector<Line> path;
  const Node* cur = opts_.merge == TreeOptions::Merge::Function ? root_.get() : func_root_.get();
  int level = 0;
  while (!cur->children.empty()) {
    const Node* best = nullptr;
    uint64_t in_children = 0;
    for (const auto& c : cur->children) {
      in_children += c->count;
      if (!best || c->count > best->count) best = c.get();
    }
    uint64_t ends_here = cur->count > in_children ? cur->count - in_children : 0;
    if (level > 0 && best->count <= ends_here) break;
    path.push_back({level++, best->count, best->wait_state ? nullptr : &best->frame, best->wait_state});
    cur = best;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

std::string StackTree::fingerprint() const {
  const Node* cur = opts_.merge == TreeOptions::Merge::Function ? root_.get() : func_root_.get();
  const uint64_t total = samples_;
  std::string out;
  while (total && !cur->children.empty()) {
    const Node* best = nullptr;
    for (const auto& c : cur->children)
      if (!best || c->count > best->count) best = c.get();
    if (best->count * 3 < total * 2) break;
    if (!out.empty()) out += '\n';
    if (best->wait_state) {
      out += wait_text(best->wait_state);
    } else {
      const Frame& f = best->frame;
      if (f.is_runtime()) {  // "python!slow_busy (app.py)": lines move, the function does not
        out += f.runtime + "!" + f.symbol + " (" + f.file + ")";
        cur = best;
        continue;
      }
      char off[32];
      std::snprintf(off, sizeof off, "+0x%" PRIx64, f.has_module() ? f.module_offset : f.pc);
      out += f.module + "!" + (f.symbol.empty() ? std::string(off) : f.symbol);
    }
    cur = best;
  }
  return out;
}

std::string StackTree::heaviest_stack() const {
  std::string out;
  char buf[32];
  int i = 0;
  for (const Line& l : heaviest_path()) {
    if (i) out += '\n';
    std::snprintf(buf, sizeof buf, "#%02d ", i++);
    out += buf;
    // As in render(): a name with a newline must not forge frame lines.
    out += l.frame ? log::escape_control(format_frame(*l.frame, opts_.source_locations))
                   : wait_text(l.wait_state);
  }
  return out;
}

int ModuleTable::index(const Frame& f) {
  if (!f.has_module()) return -1;
  std::string key = f.module + '\x1f' + f.build_id;
  auto it = index_.find(key);
  if (it != index_.end()) return it->second;
  int i = static_cast<int>(modules_.size());
  modules_.emplace_back(f.module, f.build_id);
  index_.emplace(std::move(key), i);
  return i;
}

std::vector<ModuleTable::NativeFrame> ModuleTable::frames(const ResolvedStack& s) {
  std::vector<NativeFrame> out;
  for (size_t i = 0; i < s.frames.size(); ++i) {
    const Frame& f = s.frames[i];
    // Inlined frames precede the frame that physically holds their pc.
    if (f.inlined()) continue;
    NativeFrame nf;
    nf.module = index(f);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%" PRIX64, nf.module >= 0 ? f.module_offset : f.pc);
    nf.offset = buf;
    out.push_back(std::move(nf));
  }
  return out;
}

}  // namespace jankbpf::stack
