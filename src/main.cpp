// jankbpf: find the moments an application's main thread is stuck in one
// long task. The recipe: parse, check the machine, run the monitor.
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <string_view>

#include "app/check.h"
#include "app/monitor.h"
#include "cli/options.h"
#include "output/output.h"
#include "report/report_cmd.h"
#include "util/crash.h"
#include "util/log.h"
#include "util/privileges.h"
#include "util/tracefs.h"

using namespace jankbpf;

static int run(int argc, char** argv);

int main(int argc, char** argv) {
  install_crash_report();
  // glibc raises its mmap threshold to the largest block freed so far (up
  // to 32 MB): after libbpf frees the kernel's BTF (5 MB) every later
  // buffer below that size would come from the heap and stay resident once
  // freed. A fixed threshold keeps big buffers mapped and given back.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  // An exception that reaches here (bad_alloc while loading, say) is a
  // runtime failure with a message, not an abort with a core dump.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    log::error("internal error: %s", e.what());
  } catch (...) {
    log::error("internal error: unknown exception");
  }
  return kExitFailure;
}

static int run(int argc, char** argv) {
  // `jankbpf report ...`: pictures from saved records; no root, no BPF.
  if (argc > 1 && std::string_view(argv[1]) == "report") return report::report_command(argc - 1, argv + 1);

  // 1. What the user asked for; bad usage exits 2 before anything else.
  ParseOutcome parsed = parse_options(argc, argv);
  if (!parsed.options) {
    fputs(parsed.message.c_str(), parsed.message_is_error ? stderr : stdout);
    if (parsed.message_is_error) fputc('\n', stderr);
    return parsed.exit_code;
  }
  Options& opts = *parsed.options;
  log::set_verbosity(opts.verbosity);

  // 2. The machine: privileges, BTF, tracefs. Each failure says what to do.
  if (std::string missing = missing_privileges(); !missing.empty()) {
    log::error("%s", missing.c_str());
    return kExitFailure;
  }
  struct stat st{};
  if (stat("/sys/kernel/btf/vmlinux", &st) != 0) {
    log::error("this kernel has no BTF (/sys/kernel/btf/vmlinux is missing); jankbpf needs a "
               "kernel built with CONFIG_DEBUG_INFO_BTF=y");
    return kExitFailure;
  }
  std::string error;
  if (tracefs::root(&error).empty()) {
    log::error("%s", error.c_str());
    return kExitFailure;
  }
  if (!tracefs::has_event("sched", "sched_switch") ||
      !tracefs::has_event("syscalls", "sys_enter_ppoll")) {
    log::error("the kernel lacks the sched or syscalls tracepoints jankbpf hooks "
               "(needs CONFIG_FTRACE_SYSCALLS and sched tracepoints under %s/events)",
               tracefs::root().c_str());
    return kExitFailure;
  }

  //    --check: the feature table for this kernel, and nothing else.
  if (opts.check) return run_check(opts);

  // 3. Where records go.
  auto out = JsonLinesOutput::open(opts.output_path, &error);
  if (!out) {
    log::error("%s", error.c_str());
    return kExitUsage;
  }

  // 4. Watch until told to stop.
  Monitor monitor(std::move(opts), std::move(out));
  return monitor.run();
}
