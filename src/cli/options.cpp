#include "cli/options.h"

#include <CLI/CLI.hpp>

#include "version.h"

#include <map>

namespace jankbpf {
namespace {

constexpr const char* kExamples = R"(
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
  double duration = 0;
  auto* dur = app.add_option("-d,--duration", duration, "Stop after S seconds")
                  ->check(CLI::Range(0.001, 31536000.0))
                  ->type_name("S");
  app.add_option("-o,--output", o.output_path, "Append JSON lines to FILE instead of stdout")
      ->type_name("FILE");
  app.add_flag("-v,--verbose", o.verbosity, "More status on stderr (repeat for more)");
  std::string watchdog = "auto";
  app.add_option("--watchdog", watchdog,
                 "How running tasks are checked: timer (bpf_timer), scan (cpu-clock tick), auto (timer when the kernel allows)")
      ->check(CLI::IsMember({"auto", "timer", "scan"}))
      ->type_name("auto|timer|scan");
  std::vector<std::string> markers;
  app.add_option("--marker", markers,
                 "Task boundaries marked by the program (repeatable): BEGIN,END where each is "
                 "BINARY:SYMBOL (uprobe), BINARY:SYMBOL%return (uretprobe) or BINARY:PROVIDER:NAME "
                 "(USDT); or a preset: glib, libuv, glib=BINARY, libuv=BINARY")
      ->allow_extra_args(false)
      ->type_name("SPEC");
  auto* cmd = app.add_option("command", o.command, "Command to run and watch (after --)")
                  ->type_name("-- CMD [ARGS...]");
  pid->excludes(comm)->excludes(cmd);
  comm->excludes(cmd);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out.message = app.help();
    return out;
  } catch (const CLI::CallForVersion&) {
    out.message = std::string("jankbpf ") + JANKBPF_VERSION + "\n";
    return out;
  } catch (const CLI::ParseError& e) {
    return usage_error(std::string(e.what()) + "\nRun 'jankbpf --help' for usage.");
  }

  // The kernel keeps 15 characters of a name (TASK_COMM_LEN - 1).
  if (o.comm.size() > 15)
    return usage_error("--comm: '" + o.comm + "' is longer than the 15 characters the kernel keeps of a process name");
  const std::string threshold = " must be greater than --threshold (" + std::to_string(o.threshold_ms) + " ms)";
  if (o.trace_threshold_ms <= o.threshold_ms)
    return usage_error("--trace-threshold (" + std::to_string(o.trace_threshold_ms) + " ms)" + threshold);
  if (o.hang_ms <= o.threshold_ms)
    return usage_error("--hang-threshold (" + std::to_string(o.hang_ms) + " ms)" + threshold);
  if (*dur) o.duration_s = duration;
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
  o.threads = threads == "all" ? ThreadScope::All : ThreadScope::Main;
  o.watchdog = watchdog == "timer" ? WatchdogMode::Timer
               : watchdog == "scan" ? WatchdogMode::Scan
                                    : WatchdogMode::Auto;
  out.options = std::move(o);
  return out;
}

}  // namespace jankbpf
