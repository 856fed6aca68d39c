// Which watched processes run CPython, V8 or HotSpot, and their threads' frames.
//
// The ring thread does both, when a sample arrives: the frames can only be
// read while the sampled thread is still where the sample shows it, so the
// runtime must be known by then -- the first sample of a process finds it
// (runtime_find.h: a cheap look, each file once per run). The reporter
// thread asks whether a process is Python, and drops what is known of a
// process that exited or exec'd.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime/runtime_find.h"
#include "runtime/interleave.h"
#include "runtime/python_frames.h"
#include "runtime/hotspot_frames.h"
#include "runtime/v8_frames.h"
#include "util/budget.h"

namespace jankbpf::runtime {

class RuntimeProcesses {
 public:
  // Ring thread: the Python frames thread tid of pid runs now (Status::None
  // when pid does not run a supported CPython), with the time of the read
  // (the reporter keeps them only if the task was still running then).
  // `sample_ns`: when the sample was taken (CLOCK_MONOTONIC; 0 for an
  // off-CPU capture, whose thread waits where it was); one older than
  // kMaxReadDelayNs is Status::Late, not read: even inside its task, the
  // thread's Python frames would be those of another moment.
  PyCapture capture(pid_t pid, pid_t tid, uint64_t sample_ns);
  static constexpr uint64_t kMaxReadDelayNs = 100'000'000;
  // What the walkers' caches (code objects, line tables, scripts) may hold:
  // each walker keeps its own under kMaxPyCacheBytes (Python) or about 7 MiB
  // (V8); these bound a uid's and all of them (issue 26).
  static constexpr uint64_t kCacheBytesPerUid = 32ull << 20, kCacheBytesTotal = 128ull << 20;

  // Ring thread: the JavaScript frames of a V8 process's sample (`s`: its
  // registers and stack copy), read now; Status::None for other processes,
  // Late as for capture().
  JsCapture capture_js(pid_t pid, uint64_t sample_ns, const NativeStack& s);

  // Ring thread: the Java frames of a HotSpot process's sample, read now
  // (hotspot_frames.h); Status::None for other processes, Late as above.
  JavaCapture capture_java(pid_t pid, pid_t tid, uint64_t sample_ns, const NativeStack& s);

  // Ring thread: whether pid runs a supported CPython or V8 (its samples
  // are then wanted as soon as they are taken), looked at now if it was
  // not before (once per process and exec: its symbols are read).
  bool look(pid_t pid);

  // Any thread: what pid was found to run (Native until looked at).
  RuntimeKind kind(pid_t pid);
  // The process exec'd since it was looked at (`nice python3 app.py` is not
  // Python when first seen): look again at its next sample. Called when a
  // task of the process turns long (an exec ends the task), so one stat()
  // per long task, none per sample.
  void check_exec(pid_t pid);
  void forget(pid_t pid);

 private:
  void discover(pid_t pid);
  // The tid as the process's pid namespace numbers it (PyThreadState has
  // that one): NSpid's last field in /proc/PID/task/TID/status.
  static uint64_t ns_tid(pid_t pid, pid_t tid);

  std::mutex mu_;
  using Kind = RuntimeKind;
  struct Live;
  Live* live_for(pid_t pid);
  struct Known {
    Kind kind = Kind::Native;
    uint64_t exe_dev = 0, exe_ino = 0;  // the executable looked at
  };
  std::unordered_map<pid_t, Known> known_;  // under mu_

  // Ring thread only.
  RuntimeFinder finder_;
  BudgetLedger ledger_{{0, kCacheBytesPerUid, kCacheBytesTotal}};  // before live_: outlives its charges
  struct Live {
    std::unique_ptr<PythonWalker> walker;  // null: not Python
    std::unique_ptr<V8Walker> v8;          // null: not V8
    std::unique_ptr<HotSpotWalker> java;   // null: not a HotSpot JVM
    std::unordered_map<pid_t, uint64_t> ns_tids;
    BudgetLedger::Charge charge;  // what its walker's caches hold
  };
  // After a walk: its caches charged, emptied if they do not fit (true then).
  bool settle(Live& live, size_t held);
  std::unordered_map<pid_t, Live> live_;
};

}  // namespace jankbpf::runtime
