// The kind of a task's largest cause: the kind whose slices sum to the most
// time (ties to the first in priority order). The one cause the bounded
// renderings name -- Prometheus's `cause` label, the HTML report's causes
// table -- so they agree. "none" when no cause was named: causes were off
// (`causes_known` false) or the task never left the CPU.
#pragma once

#include <array>
#include <string_view>

#include "cause/kinds.h"
#include "model/records.h"

namespace jankbpf::cause {

inline constexpr std::string_view kNoCause = "none";

inline std::string_view largest_kind(const TaskRecord& r) {
  if (!r.causes_known) return kNoCause;
  std::array<double, kKinds.size()> ms{};
  for (const auto& s : r.cause) {
    size_t k = kind_rank(s.kind);
    if (k < ms.size() && s.ms > 0) ms[k] += s.ms;
  }
  size_t best = 0;
  for (size_t k = 1; k < ms.size(); k++)
    if (ms[k] > 0 && (best == 0 || ms[k] > ms[best])) best = k;
  return best ? kKinds[best] : kNoCause;
}

}  // namespace jankbpf::cause
