#include "util/budget.h"

#include <algorithm>
#include <limits>

namespace jankbpf {

std::string_view budget_name(uint32_t bit) {
  switch (bit) {
    case kBudgetElfBytes: return "elf_bytes";
    case kBudgetModules: return "modules";
    case kBudgetPerfMap: return "perf_map";
    case kBudgetRuntimeCache: return "runtime_cache";
    case kBudgetReporterTime: return "reporter_time";
    case kBudgetRecordRate: return "record_rate";
    case kBudgetTime: return "parse_time";
    default: return "unknown";
  }
}

namespace {
uint64_t room(uint64_t limit, uint64_t used) {
  if (!limit) return std::numeric_limits<uint64_t>::max();
  return used >= limit ? 0 : limit - used;
}
}  // namespace

uint64_t BudgetLedger::headroom_locked(pid_t pid, uid_t uid) const {
  auto p = by_pid_.find(pid);
  auto u = by_uid_.find(uid);
  return std::min({room(limits_.total, total_), room(limits_.per_process, p == by_pid_.end() ? 0 : p->second),
                   room(limits_.per_uid, u == by_uid_.end() ? 0 : u->second)});
}

uint64_t BudgetLedger::headroom(pid_t pid, uid_t uid) const {
  std::lock_guard lk(mu_);
  return headroom_locked(pid, uid);
}

bool BudgetLedger::grow(pid_t pid, uid_t uid, uint64_t by) {
  std::lock_guard lk(mu_);
  if (by > headroom_locked(pid, uid)) return false;
  total_ += by;
  by_pid_[pid] += by;
  by_uid_[uid] += by;
  high_ = std::max(high_, total_);
  return true;
}

void BudgetLedger::shrink(pid_t pid, uid_t uid, uint64_t by) {
  std::lock_guard lk(mu_);
  total_ -= std::min(total_, by);
  if (auto p = by_pid_.find(pid); p != by_pid_.end() && (p->second -= std::min(p->second, by)) == 0) by_pid_.erase(p);
  if (auto u = by_uid_.find(uid); u != by_uid_.end() && (u->second -= std::min(u->second, by)) == 0) by_uid_.erase(u);
}

BudgetLedger::Charge BudgetLedger::charge(pid_t pid, uid_t uid, uint64_t bytes, bool* ok) {
  Charge c;
  c.ledger_ = this;
  c.pid_ = pid;
  c.uid_ = uid;
  bool fits = c.resize(bytes);
  if (ok) *ok = fits;
  return c;
}

uint64_t BudgetLedger::held() const {
  std::lock_guard lk(mu_);
  return total_;
}

uint64_t BudgetLedger::held_by(pid_t pid) const {
  std::lock_guard lk(mu_);
  auto p = by_pid_.find(pid);
  return p == by_pid_.end() ? 0 : p->second;
}

uint64_t BudgetLedger::high_water() const {
  std::lock_guard lk(mu_);
  return high_;
}

BudgetLedger::Charge& BudgetLedger::Charge::operator=(Charge&& o) noexcept {
  if (this != &o) {
    release();
    ledger_ = o.ledger_;
    pid_ = o.pid_;
    uid_ = o.uid_;
    bytes_ = o.bytes_;
    o.ledger_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void BudgetLedger::Charge::release() {
  if (ledger_ && bytes_) ledger_->shrink(pid_, uid_, bytes_);
  bytes_ = 0;
}

bool BudgetLedger::Charge::resize(uint64_t bytes) {
  if (!ledger_) {  // counted, not charged anywhere
    bytes_ = bytes;
    return true;
  }
  if (bytes > bytes_) {
    if (!ledger_->grow(pid_, uid_, bytes - bytes_)) return false;
  } else if (bytes < bytes_) {
    ledger_->shrink(pid_, uid_, bytes_ - bytes);
  }
  bytes_ = bytes;
  return true;
}

}  // namespace jankbpf
