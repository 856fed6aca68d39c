// JSON lines as a fleet's copy may hold them (or someone who planted them):
// `jankbpf report`'s reader must keep within its bounds -- tasks, files a
// record names, arrays, line length and nesting -- and never crash. Stack
// logs are not opened here (fuzz_stack_log has their parser): the paths
// are the input's.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "report/jsonl_reader.h"

using namespace jankbpf;
using namespace jankbpf::report;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::istringstream in(text);
  ReadOptions opts;
  opts.read_logs = false;
  ReadStats st;
  Run run = read_jsonl(in, opts, &st);
  if (run.tasks.size() > Run::kMaxTasks || run.exits.size() > Run::kMaxExits) abort();
  if (st.bad_lines > st.lines || st.records > st.lines) abort();
  for (const auto& t : run.tasks) {
    if (t.rec.external_log.size() > 8 || t.rec.off_cpu.size() > 256) abort();
    for (const auto& o : t.rec.off_cpu)
      if (o.kernel_stack.size() > 256 || o.waker.kernel_stack.size() > 256 || o.waker.user_stack.size() > 256)
        abort();
  }
  // One line alone, as task_from_json takes it.
  TaskRecord rec;
  std::string error;
  task_from_json(text.substr(0, text.find('\n')), &rec, &error);
  return 0;
}
