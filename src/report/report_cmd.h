// `jankbpf report JANKS.jsonl -o FILE.html [--perfetto F] [--folded F]`:
// the report outputs after the fact. Needs no root and loads no BPF.
#pragma once

namespace jankbpf::report {

// argv[0] is "report". Returns the exit status (0 ok, 1 a file could not
// be written, 2 bad usage).
int report_command(int argc, char** argv);

}  // namespace jankbpf::report
