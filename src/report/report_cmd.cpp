#include "report/report_cmd.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "report/jsonl_reader.h"
#include "report/writer.h"
#include "util/log.h"

namespace jankbpf::report {

int report_command(int argc, char** argv) {
  CLI::App app{"jankbpf report: an HTML report, a Perfetto trace or folded stacks from jankbpf's JSON lines "
               "and the stack logs they name (no root, no BPF).",
               "jankbpf report"};
  std::string input;
  ReportFiles files;
  std::string folded_by = "process";
  std::vector<std::string> log_dirs;
  app.add_option("input", input, "JSON lines written by jankbpf (- for stdin)")->required()->type_name("JANKS.jsonl");
  app.add_option("-o,--output,--report", files.html, "Write the HTML report to FILE")->type_name("FILE.html");
  app.add_option("--perfetto", files.perfetto, "Write a Perfetto trace to FILE")->type_name("FILE.pftrace");
  app.add_option("--folded", files.folded, "Write folded stacks to FILE")->type_name("FILE");
  app.add_option("--folded-by", folded_by, "One block per process (default) or per jank")
      ->check(CLI::IsMember({"process", "jank"}))
      ->type_name("process|jank");
  app.add_option("--log-dir", log_dirs,
                 "Where to look for stack logs and traces whose recorded path is gone (repeatable; the "
                 "input's directory is always looked in)")
      ->type_name("DIR");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s\nRun 'jankbpf report --help' for usage.\n", e.what());
    return 2;
  }
  if (!files.any()) {
    std::fprintf(stderr, "report: nothing to write: give at least one of -o FILE.html, --perfetto FILE.pftrace, "
                         "--folded FILE\n");
    return 2;
  }
  files.folded_by = folded_by == "jank" ? FoldedBy::Jank : FoldedBy::Process;
  ReportWriter writer(files);
  if (std::string error; !writer.check(&error)) {
    std::fprintf(stderr, "report: %s\n", error.c_str());
    return 2;
  }
  ReadOptions ro;
  ro.log_dirs = log_dirs;
  std::ifstream file;
  std::istream* in = &std::cin;
  if (input != "-") {
    file.open(input);
    if (!file) {
      std::fprintf(stderr, "report: cannot read '%s': %s\n", input.c_str(), std::strerror(errno));
      return 2;
    }
    in = &file;
    auto slash = input.rfind('/');
    ro.log_dirs.push_back(slash == std::string::npos ? "." : input.substr(0, slash ? slash : 1));
  }
  ReadStats st;
  Run run = read_jsonl(*in, ro, &st);
  std::fprintf(stderr, "report: %zu records, %zu janks and hangs, %zu stack logs read", st.records, run.tasks.size(),
               st.stack_logs);
  if (st.logs_missing) std::fprintf(stderr, ", %zu logs not found", st.logs_missing);
  if (st.bad_lines) std::fprintf(stderr, ", %zu lines that are not JSON skipped", st.bad_lines);
  if (st.lines_too_long) std::fprintf(stderr, " (%zu over 4 MiB)", st.lines_too_long);
  if (st.logs_repeated) std::fprintf(stderr, ", %zu logs named again (read once)", st.logs_repeated);
  if (st.logs_truncated) std::fprintf(stderr, ", %zu logs past the stack-log bounds (cut)", st.logs_truncated);
  if (run.tasks_dropped) std::fprintf(stderr, ", %" PRIu64 " janks past %zu not kept", run.tasks_dropped, Run::kMaxTasks);
  if (st.samples_dropped) std::fprintf(stderr, ", %" PRIu64 " samples past the run's bounds not kept", st.samples_dropped);
  std::fputc('\n', stderr);
  if (st.logs_refused) {
    std::fprintf(stderr, "report: %zu logs refused, e.g.", st.logs_refused);
    for (const auto& why : st.refusals) std::fprintf(stderr, " %s;", log::escape_control(why).c_str());
    std::fputc('\n', stderr);
  }
  std::string error;
  if (!writer.write(run, true, &error)) {
    std::fprintf(stderr, "report: %s\n", error.c_str());
    return 1;
  }
  return 0;
}

}  // namespace jankbpf::report
