// What one watched process (and one uid) may make jankbpf hold (issue 26):
// bytes counted per process, per uid and overall, each with a limit. A
// process that would go over one of them gets less (fewer sections copied,
// fewer perf-map entries kept, no cached line table): the record names the
// budget (`budget_exceeded`) and the summary counts it, the host is not
// what pays.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace jankbpf {

// The budgets a record can name in `budget_exceeded`, as bits.
enum Budget : uint32_t {
  kBudgetElfBytes = 1u << 0,      // ELF sections copied (per file, process, uid, overall)
  kBudgetModules = 1u << 1,       // ELF files held open as modules (per process, overall)
  kBudgetPerfMap = 1u << 2,       // perf-map bytes read and entries kept
  kBudgetRuntimeCache = 1u << 3,  // Python/V8 objects read and cached
  kBudgetReporterTime = 1u << 4,  // the reporter's time (per uid): stacks skipped
  kBudgetRecordRate = 1u << 5,    // records a second (--record-rate, --record-rate-uid)
  kBudgetTime = 1u << 6,          // one file's parse took its time budget: cut short
};
inline constexpr uint32_t kBudgetCount = 7;
// "elf_bytes", "modules", ...: the names records and the summary use.
std::string_view budget_name(uint32_t bit);

// Bytes held on behalf of processes. Thread-safe.
class BudgetLedger {
 public:
  struct Limits {
    uint64_t per_process = 0, per_uid = 0, total = 0;  // 0: no limit at that level
  };
  explicit BudgetLedger(Limits l) : limits_(l) {}
  BudgetLedger(const BudgetLedger&) = delete;
  BudgetLedger& operator=(const BudgetLedger&) = delete;

  // How many more bytes pid (of uid) may take now: the least headroom of
  // its process, its uid and the total.
  uint64_t headroom(pid_t pid, uid_t uid) const;

  // A charge, released when it goes out of scope. Movable. A default one
  // belongs to no ledger: it only counts.
  class Charge {
   public:
    Charge() = default;
    Charge(Charge&& o) noexcept { *this = std::move(o); }
    Charge& operator=(Charge&& o) noexcept;
    ~Charge() { release(); }
    void release();
    // Grows or shrinks the charge to `bytes`: false (nothing changed) when
    // growing would pass a limit.
    bool resize(uint64_t bytes);
    uint64_t bytes() const { return bytes_; }

   private:
    friend class BudgetLedger;
    BudgetLedger* ledger_ = nullptr;
    pid_t pid_ = 0;
    uid_t uid_ = 0;
    uint64_t bytes_ = 0;
  };
  // `bytes` for pid, or an empty charge (bytes() == 0 and !ok) when it
  // does not fit under every limit.
  Charge charge(pid_t pid, uid_t uid, uint64_t bytes, bool* ok = nullptr);

  uint64_t held() const;
  uint64_t held_by(pid_t pid) const;
  uint64_t high_water() const;
  const Limits& limits() const { return limits_; }

 private:
  bool grow(pid_t pid, uid_t uid, uint64_t by);
  void shrink(pid_t pid, uid_t uid, uint64_t by);
  uint64_t headroom_locked(pid_t pid, uid_t uid) const;

  const Limits limits_;
  mutable std::mutex mu_;
  uint64_t total_ = 0, high_ = 0;
  std::unordered_map<pid_t, uint64_t> by_pid_;
  std::unordered_map<uid_t, uint64_t> by_uid_;
};

}  // namespace jankbpf
