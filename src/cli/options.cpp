#include "cli/options.h"

#include <CLI/CLI.hpp>

#include "jankbpf/rate.h"
#include "version.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <vector>

namespace jankbpf {
namespace {

constexpr const char* kExamples = R"(
A command to run and watch goes after '--':  jankbpf [OPTIONS] -- CMD [ARGS...]

Examples:
  sudo jankbpf                                  watch every process's main thread
  sudo jankbpf --pid $(pidof redis-server)      watch one process
  sudo jankbpf --comm node --threads all        every thread of every 'node'
  sudo jankbpf --threshold 100 -- ./myapp --x   run a command and watch it
  sudo jankbpf --duration 60 --output janks.jsonl
  sudo jankbpf --marker glib --marker libuv      a task per GLib dispatch, per libuv phase
  sudo jankbpf --marker ./app:dispatch_begin,./app:dispatch_end
  sudo jankbpf --marker ./app:run_one,./app:run_one%return --marker ./app:loop:begin,./app:loop:end

Output: one JSON object per line on stdout (records: jank, hang, exit,
summary); status messages go to stderr. Exit status: 0 ok, 1 runtime
failure (privileges, kernel features), 2 bad usage; with -- CMD, the
command's own exit status.
)";

// Levenshtein distance, for "did you mean".
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); j++) row[j] = j;
  for (size_t i = 1; i <= a.size(); i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); j++) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// What CLI11 could not place, said plainly: an unknown option (with the
// nearest real one), or a word that was meant as a command but lacks "--".
std::string explain_extras(const CLI::App& app, const std::vector<std::string>& extras) {
  for (const std::string& arg : extras) {
    if (arg.size() < 2 || arg[0] != '-') continue;
    std::string name = arg.substr(0, arg.find('='));
    std::string best;
    size_t best_d = 3;  // suggest only close misspellings
    for (const CLI::Option* o : app.get_options())
      for (const std::string& l : o->get_lnames()) {
        size_t d = edit_distance(name, "--" + l);
        if (d < best_d) best_d = d, best = "--" + l;
      }
    return "unknown option '" + name + "'" + (best.empty() ? "" : " (did you mean " + best + "?)");
  }
  return "unexpected argument '" + extras.front() + "': a command to run goes after '--' (jankbpf [OPTIONS] -- " +
         extras.front() + " ...)";
}

}  // namespace

ParseOutcome parse_options(int argc, char** argv) {
  Options o;
  ParseOutcome out;
  auto usage_error = [&out](std::string message) {
    out.exit_code = kExitUsage;
    out.message_is_error = true;
    out.message = std::move(message);
    return out;
  };
  CLI::App app{"jankbpf: find the moments an application's main thread is stuck in one long task.",
               "jankbpf"};
  app.footer(kExamples);
  app.set_version_flag("--version", std::string("jankbpf ") + JANKBPF_VERSION);

  auto* pid = app.add_option("-p,--pid", o.pids, "Watch this process (repeatable)")
                  ->check(CLI::Range(1, 4194304))
                  ->allow_extra_args(false)  // one PID per --pid: a stray word is reported
                  ->type_name("PID");
  auto* comm = app.add_option("-c,--comm", o.comm,
                              "Watch processes whose name (comm) is NAME, also ones started later")
                   ->type_name("NAME");
  app.add_option("--threshold", o.threshold_ms, "Report tasks at least this long (default 150)")
      ->check(CLI::Range(1u, 600000u))
      ->type_name("MS");
  app.add_option("--trace-threshold", o.trace_threshold_ms,
                 "Tasks longer than this get a trace (default 450)")
      ->check(CLI::Range(1u, 600000u))
      ->type_name("MS");
  app.add_option("--hang-threshold", o.hang_ms,
                 "Send a hang record while a task is still running after this (default 3000)")
      ->check(CLI::Range(1u, 3600000u))
      ->type_name("MS");
  std::string threads = "main";
  app.add_option("--threads", threads, "main: the main thread of each process (default); all: every thread that waits in an event loop")
      ->check(CLI::IsMember({"main", "all"}))
      ->type_name("main|all");
  // The seed's keys: validated by one ConfigBuilder, file and flags alike.
  std::string config_path;
  app.add_option("--config", config_path,
                 "MAIN_THREAD_JANK configuration: a JSON object of the seed's keys with string "
                 "values, e.g. {\"log_type\":\"1\",\"sample_interval\":\"100\"}; flags override it")
      ->type_name("FILE");
  struct SeedFlag {
    const char* flag;
    const char* key;
    const char* help;
    const char* type;
  };
  static const SeedFlag seed_flags[] = {
      {"--log-type", "log_type", "0: stacks below the trace bound, trace past it (default); 1: stacks only; 2: trace only", "0|1|2"},
      {"--sample-interval", "sample_interval", "Seed sampling interval, 50..500 (default 150)", "MS"},
      {"--ignore-startup-time", "ignore_startup_time", "No checks in a process's first S seconds (default 10, minimum 3)", "S"},
      {"--sample-count", "sample_count", "Samples per report window, 1..2500/sample_interval-4 (default 10)", "N"},
      {"--report-times-per-app", "report_times_per_app", "Stack reports per process per day (per hour with --dev), 1..3 (default 1)", "N"},
  };
  std::vector<std::string> seed_values(std::size(seed_flags));
  std::vector<CLI::Option*> seed_opts;
  for (size_t i = 0; i < std::size(seed_flags); i++)
    seed_opts.push_back(app.add_option(seed_flags[i].flag, seed_values[i], seed_flags[i].help)
                            ->type_name(seed_flags[i].type));
  app.add_flag("--dev", o.dev, "Developer mode: stack quotas count per hour instead of per day");
  app.add_flag("--kernel-locks,!--no-kernel-locks", o.kernel_locks,
               "Name contended kernel locks as a cause (kernel_lock, from the lock:contention_* tracepoints; on by "
               "default, --no-kernel-locks leaves them unattached)");
  app.add_option("--log-dir", o.log_dir, "Where stack and trace logs go (default /var/log/jankbpf)")
      ->type_name("DIR");
  app.add_option("--log-cap", o.log_cap, "Total size of the log directory's files, e.g. 10MB (default 10MB)")
      ->transform(CLI::AsSizeValue(false))
      ->type_name("SIZE");
  app.add_option("--stack-size", o.stack_bytes,
                 "Bytes of user stack copied per on-CPU sample, 4096..65528 (default 16384)")
      ->check(CLI::Range(4096u, 65528u))
      ->type_name("BYTES");
  app.add_option("--sample-period", o.sample_period_ms,
                 "One stack per this many ms of a long task, 1..1000 (default 10)")
      ->check(CLI::Range(1u, 1000u))
      ->type_name("MS");
  app.add_option("--offcpu-rate", o.offcpu_rate,
                 "Off-CPU stack captures per second per process, and per uid for its processes together, 0..100000, 0: no limit (default 100)")
      ->check(CLI::Range(0u, uint32_t{JB_RATE_MAX}))
      ->type_name("N");
  app.add_option("--record-rate", o.record_rate,
                 "Long tasks reported a second per process (a bucket of N), 0..100000, 0: no limit (default 10)")
      ->check(CLI::Range(0u, uint32_t{JB_RATE_MAX}))
      ->type_name("N");
  app.add_option("--record-rate-uid", o.record_rate_uid,
                 "Long tasks reported a second per uid (a bucket of 10 s of them), 0..100000, 0: no limit (default 100)")
      ->check(CLI::Range(0u, uint32_t{JB_RATE_MAX}))
      ->type_name("N");
  double duration = 0;
  auto* dur = app.add_option("-d,--duration", duration, "Stop after S seconds")
                  ->check(CLI::Range(0.001, 31536000.0))
                  ->type_name("S");
  app.add_option("-o,--output", o.output_path, "Append JSON lines to FILE instead of stdout")
      ->type_name("FILE");
  app.add_option("--report", o.report_html, "Write an HTML report (timeline, flame graphs) to FILE, rewritten as janks arrive")
      ->type_name("FILE.html");
  app.add_option("--perfetto", o.perfetto_path, "Write a Perfetto trace of the run to FILE")->type_name("FILE.pftrace");
  app.add_option("--folded", o.folded_path, "Write folded stacks (frame;frame COUNT) to FILE")->type_name("FILE");
  std::string folded_by = "process";
  app.add_option("--folded-by", folded_by, "--folded blocks: one per process (default) or one per jank")
      ->check(CLI::IsMember({"process", "jank"}))
      ->type_name("process|jank");
  app.add_flag("-v,--verbose", o.verbosity, "More status on stderr (repeat for more)");
  app.add_flag("--check", o.check,
               "Try every kernel feature jankbpf uses, print what works and what replaces what does not, and exit");
  std::string watchdog = "auto";
  app.add_option("--watchdog", watchdog,
                 "How running tasks are checked: timer (bpf_timer), scan (cpu-clock tick), auto (timer when the kernel allows)")
      ->check(CLI::IsMember({"auto", "timer", "scan"}))
      ->type_name("auto|timer|scan");
  std::string hooks = "auto";
  app.add_option("--hooks", hooks,
                 "How the waits are hooked: trampoline (fentry/fexit, nothing for processes that do "
                 "not wait), tracepoint (syscall tracepoints), raw-tracepoint (two raw tracepoints on every "
                 "syscall, x86_64: a stop in milliseconds, every syscall of every process dearer), auto "
                 "(trampolines where the kernel has them)")
      ->check(CLI::IsMember({"auto", "trampoline", "tracepoint", "raw-tracepoint"}))
      ->type_name("auto|trampoline|tracepoint|raw-tracepoint");
  std::vector<std::string> markers;
  app.add_option("--marker", markers,
                 "Task boundaries marked by the program (repeatable): BEGIN,END where each is "
                 "BINARY:SYMBOL (uprobe), BINARY:SYMBOL%return (uretprobe) or BINARY:PROVIDER:NAME "
                 "(USDT); or a preset: glib, libuv, glib=BINARY, libuv=BINARY")
      ->allow_extra_args(false)
      ->type_name("SPEC");
  std::string metrics;
  auto* metrics_opt = app.add_option("--metrics", metrics,
                                     "Serve Prometheus metrics over HTTP at /metrics: PORT (on 127.0.0.1), "
                                     "IPV4:PORT, [IPV6]:PORT or localhost:PORT")
                          ->type_name("ADDR:PORT");
  std::string trace_recorder = "on-demand";
  app.add_option("--trace-recorder", trace_recorder,
                 "When the ftrace instance for traces records: on-demand (from a watched task's early mark or "
                 "threshold crossing on, so traces start inside the task and a machine with no long task pays "
                 "for no trace events) or always (a flight recorder: traces also show what led up to a task, "
                 "every scheduler, interrupt and block event of the machine recorded all along)")
      ->check(CLI::IsMember({"on-demand", "always"}))
      ->type_name("on-demand|always");
  std::string frames = "on";
  app.add_option("--frames", frames,
                 "Frames of Wayland clients (processes that map libwayland-client): a `frame` record per "
                 "janky frame, per-surface statistics (default on)")
      ->check(CLI::IsMember({"on", "off"}))
      ->type_name("on|off");
  app.add_option("--frame-interval", o.frame_interval_ms,
                 "The refresh interval frames are held to, 1..1000 (default: the compositor's, from "
                 "presentation feedback or wl_output's mode, else 16.667)")
      ->check(CLI::Range(1.0, 1000.0))
      ->type_name("MS");
  pid->excludes(comm);
  // The command is everything after "--", and only that: taken off before
  // CLI11 sees the rest, so a misspelt flag or a stray word is reported as
  // what it is instead of being run as a command.
  int cut = argc;
  for (int i = 1; i < argc; i++)
    if (std::string_view(argv[i]) == "--") {
      cut = i;
      break;
    }
  for (int i = cut + 1; i < argc; i++) o.command.emplace_back(argv[i]);

  try {
    app.parse(cut, argv);
  } catch (const CLI::ExtrasError&) {
    return usage_error(explain_extras(app, app.remaining()) + "\nRun 'jankbpf --help' for usage.");
  } catch (const CLI::CallForHelp&) {
    out.message = app.help();
    return out;
  } catch (const CLI::CallForVersion&) {
    out.message = std::string("jankbpf ") + JANKBPF_VERSION + "\n";
    return out;
  } catch (const CLI::ParseError& e) {
    return usage_error(std::string(e.what()) + "\nRun 'jankbpf --help' for usage.");
  }

  if (cut < argc && o.command.empty()) return usage_error("'--' must be followed by a command to run");
  if (!o.command.empty() && (!o.pids.empty() || !o.comm.empty()))
    return usage_error(std::string(o.pids.empty() ? "--comm" : "--pid") +
                       " excludes -- CMD: watch named processes or run a command, not both");
  // The kernel keeps 15 characters of a name (TASK_COMM_LEN - 1).
  if (o.comm.size() > 15)
    return usage_error("--comm: '" + o.comm + "' is longer than the 15 characters the kernel keeps of a process name");
  const std::string threshold = " must be greater than --threshold (" + std::to_string(o.threshold_ms) + " ms)";
  if (o.trace_threshold_ms <= o.threshold_ms)
    return usage_error("--trace-threshold (" + std::to_string(o.trace_threshold_ms) + " ms)" + threshold);
  if (o.hang_ms <= o.threshold_ms)
    return usage_error("--hang-threshold (" + std::to_string(o.hang_ms) + " ms)" + threshold);
  if (*dur) o.duration_s = duration;
  if (*metrics_opt) {
    std::string why;
    o.metrics = parse_listen_addr(metrics, &why);
    if (!o.metrics) return usage_error(why);
  }
  for (const auto& m : markers) {
    std::string why;
    auto spec = parse_marker(m, &why);
    if (!spec) {
      out.exit_code = kExitUsage;
      out.message_is_error = true;
      out.message = "--marker: " + why;
      return out;
    }
    o.markers.push_back(std::move(*spec));
  }
  try {
    ConfigBuilder cb;
    if (!config_path.empty()) cb.load_file(config_path);
    for (size_t i = 0; i < std::size(seed_flags); i++) {
      if (!*seed_opts[i]) continue;
      try {
        cb.apply(seed_flags[i].key, seed_values[i]);
      } catch (const ConfigError& e) {
        // Name the flag the user typed, then the seed's own message.
        throw ConfigError(std::string(seed_flags[i].flag) + ": " + e.what());
      }
    }
    o.jank = cb.build();
  } catch (const ConfigError& e) {
    return usage_error(e.what());
  }
  if (o.stack_bytes % 8) o.stack_bytes -= o.stack_bytes % 8;  // perf wants a multiple of 8
  o.folded_by_jank = folded_by == "jank";
  o.frames = frames == "on";
  o.trace_always = trace_recorder == "always";
  o.threads = threads == "all" ? ThreadScope::All : ThreadScope::Main;
  o.watchdog = watchdog == "timer" ? WatchdogMode::Timer
               : watchdog == "scan" ? WatchdogMode::Scan
                                    : WatchdogMode::Auto;
  o.hooks = hooks == "trampoline" ? HookKind::Trampoline
            : hooks == "tracepoint" ? HookKind::Tracepoint
            : hooks == "raw-tracepoint" ? HookKind::RawTracepoint
                                    : HookKind::Auto;
  out.options = std::move(o);
  return out;
}

}  // namespace jankbpf
