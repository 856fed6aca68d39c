// The reporter thread's own state (app/reporter.h): the resolver, the
// records parked for their traces, and each thread's stacks and off-CPU
// captures until its task is reported. Private to reporter*.cpp.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <iterator>
#include <string>
#include <unordered_map>
#include <vector>

#include "app/parked_records.h"
#include "app/reporter.h"
#include "cause/identity.h"
#include "frame/frame_causes.h"
#include "runtime/python_frames.h"
#include "stack/resolver.h"

namespace jankbpf {

// Bounds that keep memory finite when stacks arrive faster than they are
// reported (a stuck thread sampled for minutes, thousands of threads).
inline constexpr size_t kMaxStacksPerThread = 2048;
inline constexpr uint64_t kMaxStackAgeNs = 120'000'000'000ULL;
// How long a reported task's stacks stay for the frames inside it: a
// frame's record comes once its present is known (up to a second), at the
// next drain of the frames ring (every 500 ms).
inline constexpr uint64_t kFrameGraceNs = 3'000'000'000ULL;
// Threads with stacks or off-CPU captures kept at once: a thread whose task
// is never reported (short-lived processes in a fork loop) must not keep
// them for good. Past this, the thread with the oldest newest entry goes.
inline constexpr size_t kMaxStoredThreads = 4096;

struct Reporter::Impl {
  stack::Resolver resolver;
  ParkedRecords parked;  // records waiting for a trace to be saved
  struct Stored {
    uint64_t time_ns;
    pid_t pid;
    stack::ResolvedStack stack;
    // Python or JavaScript frames read at the sample's arrival: placed in
    // the stack when the task is reported, if read before it ended.
    runtime::RuntimeCapture rt;
    runtime::RuntimeKind runtime = runtime::RuntimeKind::Native;  // of the process, when the sample was unwound
  };
  std::unordered_map<pid_t, std::deque<Stored>> stacks;  // by tid
  struct OffCpu {
    pid_t pid;
    uint64_t seq, time_ns, woken_ns = 0;
    uint32_t state;
    std::vector<std::string> kstack;
    bool has_waker = false;
    WakerInfo waker;
    std::string pause_kind, pause_op;  // a JVM's own pause held it (runtime/jvm_pause.h)
  };
  std::unordered_map<pid_t, std::vector<OffCpu>> offcpu;  // by tid

  uint64_t evicted = 0;  // threads whose stored stacks were dropped unreported
  cause::ProcIdentities identities;  // what names a cause (cause/identity.h)
  frame::TaskWhys task_whys;         // the why of recent task records, for their frames (frame/frame_causes.h)

  // The reporter's time per uid (kReporterMsPerSec, kReporterBurstMs), the
  // uid of each process seen (the owner of /proc/PID), and budget bits for
  // a process's next record (its stack jobs skipped).
  struct TimeBucket {
    int64_t ns = kReporterBurstMs * 1'000'000;
    std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now();
  };
  std::unordered_map<uint32_t, TimeBucket> time_buckets;
  std::unordered_map<pid_t, uint32_t> pid_budgets;

  // Makes room for `tid` in `table` (keyed by tid, values non-empty lists
  // of entries with a time_ns, newest last).
  template <typename Table>
  void make_room(Table& table, pid_t tid, bool count) {
    if (table.size() < kMaxStoredThreads || table.count(tid)) return;
    auto oldest = table.end();
    for (auto it = table.begin(); it != table.end(); ++it)
      if (oldest == table.end() || it->second.empty() ||
          (!oldest->second.empty() && it->second.back().time_ns < oldest->second.back().time_ns))
        oldest = it;
    table.erase(oldest);
    if (count) ++evicted;
  }

  void store(pid_t tid, uint64_t time_ns, stack::ResolvedStack&& s, runtime::RuntimeCapture&& rt = {},
             runtime::RuntimeKind runtime = runtime::RuntimeKind::Native) {
    make_room(stacks, tid, true);
    auto& q = stacks[tid];
    while (!q.empty() && (q.size() >= kMaxStacksPerThread ||
                          (time_ns > q.front().time_ns && time_ns - q.front().time_ns > kMaxStackAgeNs)))
      q.pop_front();
    // Kept in time order: samples come from the perf rings in batches,
    // captures from the BPF ring at once, so a sleep's capture may come
    // before the samples taken just before it (which, unsigned, read as
    // 2^64 ns younger, once dropped the capture as too old).
    auto at = q.end();
    while (at != q.begin() && std::prev(at)->time_ns > time_ns) --at;
    pid_t pid = s.pid;
    q.insert(at, {time_ns, pid, std::move(s), std::move(rt), runtime});
  }
};

}  // namespace jankbpf
