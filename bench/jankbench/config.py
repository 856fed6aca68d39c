"""Paths and the sizes of a run. BENCH_QUICK=1 makes a smoke run: fewer
rounds, shorter windows (its results are stored apart, see store.py)."""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("JANKBPF_BUILD", os.path.join(ROOT, "build"))
JANKBPF = os.path.join(BUILD, "jankbpf")
UNIT = os.path.join(BUILD, "jankbpf-unit")
BENCHBIN = os.path.join(BUILD, "bench")
PINGPONG = os.path.join(BENCHBIN, "pingpong")
GETPPID = os.path.join(BENCHBIN, "getppid")
JANK_TARGET = os.path.join(BUILD, "tests", "jank_target")
STACK_TARGET = os.path.join(BUILD, "tests", "stack_target")
JANK_BT = os.path.join(ROOT, "bench", "jank.bt")
FLOOR_BT = os.path.join(ROOT, "bench", "floor.bt")
JANK_BCC = os.path.join(ROOT, "bench", "jank_bcc.py")
RESULTS_MD = os.path.join(ROOT, "bench", "RESULTS.md")
RESULTS_DIR = os.path.join(ROOT, "bench", "results")
# Quick runs are smoke runs: never beside the committed results.
QUICK_DIR = os.path.join(BUILD, "bench", "results-quick")
QUICK_MD = os.path.join(BUILD, "bench", "RESULTS-quick.md")
PYTHON = "/usr/bin/python3"  # Debian's, the one python3-bpfcc is installed for

# The shared runner (tests/pylib) and jank_target's helper (tests/e2e).
os.environ.setdefault("JANKBPF_BUILD", BUILD)
for _d in ("tests/pylib", "tests/e2e"):
    if os.path.join(ROOT, _d) not in sys.path:
        sys.path.insert(0, os.path.join(ROOT, _d))

QUICK = os.environ.get("BENCH_QUICK", "") not in ("", "0")


def store_dir() -> str:
    """Where a run stores its results (and finds the ones it resumes)."""
    return os.environ.get("BENCH_RESULTS_DIR") or (QUICK_DIR if QUICK else RESULTS_DIR)

ROUNDS = 2 if QUICK else 5             # throughput and tax rounds
STARTUP_REPS = 3 if QUICK else 7
RUN_S = 0.7 if QUICK else 1.2          # target length of one workload run
GETPPID_N, GETPPID_REPS = (300000, 5) if QUICK else (500000, 5)
IDLE_S = 10 if QUICK else 30
JANKY_S = 10 if QUICK else 20
THRESHOLD_MS = 150
HANG_MS = 3000
CHECK_INTERVAL_MS = 10  # issue 2: the crossing is seen within 10 ms
NOSTACK_S = 5 if QUICK else 10         # janky window of the no-stacks footprint run
WATCH_IDLE_S = 5 if QUICK else 10      # idle window watching one idle process
WARM_TASKS = 3 if QUICK else 5         # spins after the first, for the warm stack cost
SOAK_MINUTES = float(os.environ.get("SOAK_MINUTES") or (2 if QUICK else 30))
FUZZ_RUNS = int(os.environ.get("FUZZ_BENCH_RUNS") or (100000 if QUICK else 10000000))
# The workloads (servers, their clients, the ping-pong pair, the syscall
# loop) share one CPU, the last: each request then costs what its path costs
# on that CPU, instead of how fast an idle virtual CPU wakes up (this VM does
# not halt-poll), which moves throughput by 10x from minute to minute.
# They also run at nice -20, so that other work on a shared machine takes
# less of their CPU (it still moves throughput: see the baseline spread).
PIN_CPU = (os.cpu_count() or 1) - 1
TASKSET = ["nice", "-n", "-20", "taskset", "-c", str(PIN_CPU)]


def disp(argv) -> str:
    """A command line as it would be typed from the repository root."""
    import shlex
    out = []
    for a in argv:
        a = str(a)
        if a.startswith(BUILD + "/"):
            a = "build/" + a[len(BUILD) + 1:]
        elif a.startswith(ROOT + "/"):
            a = a[len(ROOT) + 1:]
        out.append(a)
    return shlex.join(out)
