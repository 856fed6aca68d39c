// Why a jank left no new log: the rule that held it back (logs/quota.h
// decides; records carry the reasons, renderers name them).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace jankbpf {

enum class Suppressed {
  None,            // allowed (and, for take_*, counted)
  StackQuota,      // "stack_quota": report_times_per_app used up in the window
  TraceQuota,      // "trace_quota": the day's trace already taken
  DuplicateStack,  // "duplicate_stack": same heaviest path already reported
};

// The record's name of a reason: "" for None.
inline std::string_view suppressed_name(Suppressed s) {
  switch (s) {
    case Suppressed::None: return "";
    case Suppressed::StackQuota: return "stack_quota";
    case Suppressed::TraceQuota: return "trace_quota";
    case Suppressed::DuplicateStack: return "duplicate_stack";
  }
  return "";
}

// The records' `suppressed` text: the reasons comma-separated, in order.
inline std::string suppressed_text(const std::vector<Suppressed>& reasons) {
  std::string out;
  for (Suppressed s : reasons) {
    if (s == Suppressed::None) continue;
    if (!out.empty()) out += ',';
    out += suppressed_name(s);
  }
  return out;
}

// The reasons back from that text (unknown names are skipped).
inline std::vector<Suppressed> parse_suppressed(std::string_view text) {
  std::vector<Suppressed> out;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view name = text.substr(0, comma);
    for (Suppressed s : {Suppressed::StackQuota, Suppressed::TraceQuota, Suppressed::DuplicateStack})
      if (name == suppressed_name(s)) out.push_back(s);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace jankbpf
