// What the user asked for, parsed and validated. Parsing never exits the
// process itself: it returns a ParseOutcome, and main decides.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bpf/modes.h"
#include "config/jank_config.h"
#include "markers/marker_spec.h"
#include "metrics/listen_addr.h"

namespace jankbpf {

enum class ThreadScope { Main, All };

struct Options {
  // Targets: none of them means every process on the machine.
  std::vector<pid_t> pids;
  std::string comm;
  std::vector<std::string> command;  // after `--`

  uint32_t threshold_ms = 150;
  uint32_t trace_threshold_ms = 450;
  // --trace-recorder: the ftrace instance records only while a watched task
  // is long (on-demand) or all along (always).
  bool trace_always = false;
  uint32_t hang_ms = 3000;
  // The seed's MAIN_THREAD_JANK configuration (log_type, sample_interval,
  // ignore_startup_time, sample_count, report_times_per_app): defaults,
  // then --config FILE, then the flags.
  JankConfig jank;
  bool dev = false;                 // quotas per hour instead of per day
  bool kernel_locks = true;         // causes' kernel_lock hooks (lock:contention_*); --no-kernel-locks
  std::string log_dir = "/var/log/jankbpf";
  uint64_t log_cap = 10ull << 20;   // bytes
  uint32_t stack_bytes = 16384;     // user stack copied per on-CPU sample
  uint32_t sample_period_ms = 10;   // one stack per this, per long task
  uint32_t offcpu_rate = 100;       // off-CPU captures a second per process (0: no limit)
  uint32_t record_rate = 10;        // long tasks reported a second per process (0: no limit)
  uint32_t record_rate_uid = 100;   // ... and per uid (0: no limit)
  ThreadScope threads = ThreadScope::Main;
  std::optional<double> duration_s;
  std::string output_path;  // empty: stdout
  // Pictures of the run, rewritten as janks arrive (src/report/).
  std::string report_html, perfetto_path, folded_path;
  bool folded_by_jank = false;  // --folded-by jank (default: per process)
  int verbosity = 0;
  bool check = false;  // --check: print what this kernel supports and exit
  WatchdogMode watchdog = WatchdogMode::Auto;
  HookKind hooks = HookKind::Auto;  // --hooks
  // Task markers (--marker): a task is a marker's span where one fires.
  std::vector<MarkerSpec> markers;
  // --metrics ADDR:PORT: Prometheus metrics over HTTP.
  std::optional<ListenAddr> metrics;
  // Wayland frames (issue 28): --frames on|off; --frame-interval MS (0: the
  // compositor's refresh).
  bool frames = true;
  double frame_interval_ms = 0;

  bool system_wide() const { return pids.empty() && comm.empty() && command.empty(); }
};

// Exit codes, documented in README.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // runtime: privileges, kernel features, I/O
inline constexpr int kExitUsage = 2;    // bad command line or configuration

struct ParseOutcome {
  std::optional<Options> options;  // set when jankbpf should run
  int exit_code = kExitOk;         // otherwise: exit with this
  std::string message;             // printed to stdout (help) or stderr (errors)
  bool message_is_error = false;
};

ParseOutcome parse_options(int argc, char** argv);

}  // namespace jankbpf
