#include "logs/quota.h"

#include <algorithm>

namespace jankbpf {
namespace {

// FNV-1a: stable across runs and builds (std::hash is not promised to be),
// and 64 bits make a false "duplicate" between two real stacks negligible.
uint64_t fingerprint_hash(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// A time is inside a window ending now when it is less than `window` old:
// a report taken at t frees its slot at exactly t + window.
bool inside(int64_t t, int64_t window, int64_t now_ms) { return now_ms - t < window; }

}  // namespace

ReportQuota::ReportQuota(QuotaPolicy policy) : policy_(policy) {}

int ReportQuota::in_window(const std::vector<int64_t>& times, int64_t window, int64_t now_ms) {
  return static_cast<int>(
      std::count_if(times.begin(), times.end(), [&](int64_t t) { return inside(t, window, now_ms); }));
}

const ReportQuota::Proc* ReportQuota::find(const ProcessKey& proc) const {
  auto it = procs_.find(proc.pid);
  if (it == procs_.end() || it->second.start != proc.start) return nullptr;
  return &it->second;
}

ReportQuota::Proc& ReportQuota::get(const ProcessKey& proc, int64_t now_ms) {
  auto it = procs_.find(proc.pid);
  if (it != procs_.end() && it->second.start != proc.start) {
    procs_.erase(it);  // a recycled pid: the old process's history is not its
    it = procs_.end();
  }
  if (it == procs_.end()) {
    bound_size(now_ms);
    it = procs_.emplace(proc.pid, Proc{}).first;
    it->second.start = proc.start;
  }
  it->second.last_ms = now_ms;
  prune(it->second, now_ms);
  return it->second;
}

void ReportQuota::prune(Proc& p, int64_t now_ms) const {
  const int64_t sw = policy_.stack_window_ms(), tw = policy_.trace_window_ms, dw = policy_.dedupe_ms();
  std::erase_if(p.stacks, [&](int64_t t) { return !inside(t, sw, now_ms); });
  std::erase_if(p.traces, [&](int64_t t) { return !inside(t, tw, now_ms); });
  std::erase_if(p.fingerprints, [&](const auto& f) { return !inside(f.second, dw, now_ms); });
}

void ReportQuota::bound_size(int64_t now_ms) {
  if (procs_.size() < policy_.max_processes) return;
  // First the processes whose every window has passed: forgetting them
  // changes no decision.
  for (auto it = procs_.begin(); it != procs_.end();) {
    prune(it->second, now_ms);
    if (it->second.stacks.empty() && it->second.traces.empty() && it->second.fingerprints.empty())
      it = procs_.erase(it);
    else
      ++it;
  }
  // Then the least recently active, which may let one of them report again
  // early: a bounded memory is worth more than an exact quota for the
  // 4097th process.
  while (procs_.size() >= policy_.max_processes && !procs_.empty()) {
    auto oldest = std::min_element(procs_.begin(), procs_.end(), [](const auto& a, const auto& b) {
      return a.second.last_ms < b.second.last_ms;
    });
    procs_.erase(oldest);
    ++counts_.evicted;
  }
}

Suppressed ReportQuota::peek_stack(const ProcessKey& proc, int64_t now_ms) const {
  std::lock_guard lk(mu_);
  const Proc* p = find(proc);
  if (!p) return Suppressed::None;
  if (in_window(p->stacks, policy_.stack_window_ms(), now_ms) >= policy_.stack_reports)
    return Suppressed::StackQuota;
  return Suppressed::None;
}

Suppressed ReportQuota::take_stack(const ProcessKey& proc, std::string_view fingerprint,
                                   int64_t now_ms) {
  std::lock_guard lk(mu_);
  Proc& p = get(proc, now_ms);
  // The duplicate check comes first: it is the more specific reason, and a
  // repeat of a known freeze should say so even when the quota is also out.
  if (!fingerprint.empty() && policy_.dedupe_ms() > 0) {
    const uint64_t h = fingerprint_hash(fingerprint);
    for (const auto& f : p.fingerprints)
      if (f.first == h) {
        ++counts_.duplicate_stack;
        return Suppressed::DuplicateStack;
      }
  }
  if (static_cast<int>(p.stacks.size()) >= policy_.stack_reports) {
    ++counts_.stack_quota;
    return Suppressed::StackQuota;
  }
  p.stacks.push_back(now_ms);
  if (!fingerprint.empty() && policy_.dedupe_ms() > 0)
    p.fingerprints.emplace_back(fingerprint_hash(fingerprint), now_ms);
  ++counts_.stack_reports;
  return Suppressed::None;
}

void ReportQuota::give_back_stack(const ProcessKey& proc, std::string_view fingerprint, int64_t taken_ms) {
  std::lock_guard lk(mu_);
  auto it = procs_.find(proc.pid);
  if (it == procs_.end() || it->second.start != proc.start) return;
  Proc& p = it->second;
  auto s = std::find(p.stacks.rbegin(), p.stacks.rend(), taken_ms);
  if (s == p.stacks.rend()) return;
  p.stacks.erase(std::next(s).base());
  if (counts_.stack_reports) --counts_.stack_reports;
  if (fingerprint.empty()) return;
  const uint64_t h = fingerprint_hash(fingerprint);
  auto f = std::find(p.fingerprints.rbegin(), p.fingerprints.rend(), std::make_pair(h, taken_ms));
  if (f != p.fingerprints.rend()) p.fingerprints.erase(std::next(f).base());
}

Suppressed ReportQuota::peek_trace(const ProcessKey& proc, int64_t now_ms) const {
  std::lock_guard lk(mu_);
  const Proc* p = find(proc);
  if (!p) return Suppressed::None;
  if (in_window(p->traces, policy_.trace_window_ms, now_ms) >= policy_.trace_reports)
    return Suppressed::TraceQuota;
  return Suppressed::None;
}

Suppressed ReportQuota::take_trace(const ProcessKey& proc, int64_t now_ms) {
  std::lock_guard lk(mu_);
  Proc& p = get(proc, now_ms);
  if (static_cast<int>(p.traces.size()) >= policy_.trace_reports) {
    ++counts_.trace_quota;
    return Suppressed::TraceQuota;
  }
  p.traces.push_back(now_ms);
  ++counts_.trace_reports;
  return Suppressed::None;
}

void ReportQuota::forget(pid_t pid) {
  std::lock_guard lk(mu_);
  procs_.erase(pid);
}

}  // namespace jankbpf
