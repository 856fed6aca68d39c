#include "report/folded.h"

#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "report/sampled.h"

namespace jankbpf::report {

std::string folded_frame(std::string_view name) {
  std::string s(name);
  for (char& c : s) {
    if (c == ';') c = ':';
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return s.empty() ? "[unnamed]" : s;
}

namespace {

// Counts per stack id, in first-seen order, for one block.
struct Block {
  std::string root;
  std::vector<std::pair<uint32_t, uint64_t>> counts;
  std::unordered_map<uint32_t, size_t> index;
  void add(uint32_t stack, uint64_t n) {
    auto [it, fresh] = index.try_emplace(stack, counts.size());
    if (fresh) counts.push_back({stack, 0});
    counts[it->second].second += n;
  }
};

std::string jank_label(const TaskRecord& r) {
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f ms", r.duration_ms);
  return std::string(r.kind == TaskRecord::Kind::Hang ? "hang" : "jank") + " " + r.proc.name + " pid " +
         std::to_string(r.proc.pid) + " tid " + std::to_string(r.tid) + " #" + std::to_string(r.task_seq) + " " + ms;
}

}  // namespace

std::string render_folded(const Run& run, FoldedBy by) {
  std::vector<Block> blocks;
  std::map<std::pair<pid_t, std::string>, size_t> by_process;
  // A hang's samples come again with its final jank: count them once
  // (looked up, not searched: a run holds up to 20,000 tasks).
  std::set<std::tuple<pid_t, uint64_t, uint64_t>> janks;
  for (const auto& t : run.tasks)
    if (t.rec.kind == TaskRecord::Kind::Jank) janks.insert({t.rec.tid, t.rec.task_seq, t.rec.begin_mono_ns});
  for (const auto& t : run.tasks) {
    if (t.rec.kind == TaskRecord::Kind::Hang && janks.count({t.rec.tid, t.rec.task_seq, t.rec.begin_mono_ns})) continue;
    if (t.samples.empty()) continue;
    Block* b;
    if (by == FoldedBy::Jank) {
      blocks.push_back({jank_label(t.rec), {}, {}});
      b = &blocks.back();
    } else {
      auto key = std::make_pair(t.rec.proc.pid, t.rec.proc.name);
      auto [it, fresh] = by_process.try_emplace(key, blocks.size());
      if (fresh) blocks.push_back({process_label(t.rec), {}, {}});
      b = &blocks[it->second];
    }
    for (const auto& s : t.samples) b->add(s.stack, s.count);
  }
  std::string out;
  const auto& frames = run.table.frames();
  const auto& stacks = run.table.stacks();
  for (const auto& b : blocks) {
    for (const auto& [id, n] : b.counts) {
      const auto& st = stacks[id];
      out += folded_frame(b.root);
      for (uint32_t f : st.frames) {
        out += ';';
        out += folded_frame(frames[f].name);
      }
      if (st.wait_state) out += ";" + off_cpu_frame(st.wait_state);
      out += ' ';
      out += std::to_string(n);
      out += '\n';
    }
  }
  return out;
}

}  // namespace jankbpf::report
