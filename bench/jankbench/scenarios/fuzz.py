"""The fuzzing section: every libFuzzer target in the Makefile's
FUZZ_TARGETS (built by make fuzz-bin from this tree, into build/fuzz/) for
FUZZ_BENCH_RUNS executions, through scripts/fuzz.sh bench, which writes
one JSON line per target (FUZZ_JSON). Each target's row is stored with the
build-id and hash of the binary that ran; the goal (goals.py) is judged
from these rows against the Makefile's list as it is when rendered."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile

from .. import builds, config
from ..goals import fuzz_targets
from ..procs import say


def fuzz(ctx) -> dict:
    runs = config.FUZZ_RUNS
    targets = fuzz_targets()
    say(f"fuzzing: {len(targets)} targets, {runs:,} executions each")
    # Each binary's identity before it runs: one rebuilt while the run is
    # still going (a fix of what it found) must not lend it its build-id.
    ids = {}
    for t in targets:
        path = os.path.join(config.ROOT, "build", "fuzz", t)
        if os.path.exists(path):
            b = builds.binary(path)
            ids[t] = (b["build_id"], b["sha256"])
    with tempfile.TemporaryDirectory(prefix="jankbpf-fuzz-") as tmp:
        lines = os.path.join(tmp, "fuzz.jsonl")
        # Targets side by side, one per CPU: each is one single-threaded
        # process, so its executions and exec/s are those of one core.
        jobs = os.environ.get("FUZZ_JOBS") or str(os.cpu_count() or 1)
        env = {**os.environ, "FUZZ_BENCH_RUNS": str(runs), "FUZZ_JSON": lines, "FUZZ_JOBS": jobs}
        rc = subprocess.run([os.path.join(config.ROOT, "scripts", "fuzz.sh"), "bench", *targets],
                            cwd=config.ROOT, env=env, stdout=subprocess.DEVNULL).returncode
        rows = [json.loads(l) for l in open(lines)] if os.path.exists(lines) else []
    for r in rows:
        if r["target"] in ids:
            r["build_id"], r["sha256"] = ids[r["target"]]
    try:
        clang = subprocess.run(["clang++", "-dumpversion"], capture_output=True, text=True).stdout.strip()
    except OSError:
        clang = "?"
    cap = os.environ.get("FUZZ_BENCH_SECONDS") or None
    return {"runs": runs, "rc": rc, "clang": clang, "cpus": os.cpu_count(), "jobs": int(jobs),
            "seconds_cap": int(cap) if cap and cap.isdigit() else None, "targets": rows,
            "commands": [f"FUZZ_BENCH_RUNS={runs} FUZZ_JOBS={jobs} scripts/fuzz.sh bench {' '.join(targets)}"]}
