"""jankbpf's benchmark as a package (issue 5; the architecture issue's item 5).

  config     paths and the run's sizes (BENCH_QUICK)
  procs      process bookkeeping, /proc and bpftool reads
  runner     build/jankbpf as the bench runs it (tests/pylib/jankrun.py)
  peers      bpftrace, BCC, redis, the ping-pong pair, the getppid loop
  scenarios  one function per measurement, returning plain data
  store      bench/results/<scenario>.json, with provenance
  goals      the table of goals: stored data -> figure, verdict
  render     one document model, written as markdown and for the terminal
  sections*  what each section of RESULTS.md shows of its data

`python3 -m jankbench --help` (from bench/) or scripts/bench.sh runs it.
"""

from . import config  # noqa: E402,F401  (puts tests/pylib and tests/e2e on sys.path)
