"""The fuzzing section: every libFuzzer target in the Makefile's
FUZZ_TARGETS (built by make fuzz-bin from this tree, into build/fuzz/) to
FUZZ_BENCH_RUNS executions, through scripts/fuzz.sh bench, which writes
one JSON line per target (FUZZ_JSON). Each target's row is stored with the
build-id and hash of the binary that ran and the files it was compiled
from; a row of the binary this tree builds again is kept, one cut short on
it resumed (fuzz_rows.py). The goal (goals.py) is judged from these rows
against the Makefile's list as it is when rendered."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time

from .. import builds, config, fuzz_rows, procs, store
from ..goals import fuzz_targets
from ..procs import say


def _previous_rows() -> list[dict]:
    """The fuzz rows stored where this run stores its own."""
    entry = store.load(config.store_dir()).get("fuzz") or {}
    prov = entry.get("provenance") or {}
    rows = entry.get("data", {}).get("targets") or []
    # Rows stored before they listed their runs ran in that entry's run.
    for r in rows:
        r.setdefault("runs", [{"commit": prov.get("commit_full") or prov.get("commit") or "?",
                               "date": prov.get("date", ""), "executions": r["executions"],
                               "seconds": r["seconds"], "rc": r["rc"]}])
    return rows


def fuzz(ctx) -> dict:
    runs = config.FUZZ_RUNS
    targets = fuzz_targets()
    fuzz_out = os.path.join(config.ROOT, "build", "fuzz")
    layout, flags = fuzz_rows.make_layout()
    # Each binary's identity before it runs: one rebuilt while the run is
    # still going (a fix of what it found) must not lend it its build-id.
    ids, srcs = {}, {}
    for t in targets:
        path = os.path.join(fuzz_out, t)
        if os.path.exists(path):
            b = builds.binary(path)
            ids[t] = (b["build_id"], b["sha256"])
            try:
                srcs[t] = fuzz_rows.sources(t, layout[t][0], fuzz_out)
            except (OSError, KeyError):
                pass  # no dependency files: the row is judged by the section's commit
    # The tree the binaries were built from, read before the hours of
    # running: a commit made meanwhile is not what ran.
    here = {"commit": builds.Git().head(), "date": procs.utc_now()}
    prev = _previous_rows()
    todo = fuzz_rows.plan(prev, ids, targets, runs)
    # By the time each needs at the rate of the row before (unknown: the
    # longest). Longest first, so that the jobs end together rather than
    # one waiting on the slowest target alone; within FUZZ_BENCH_MINUTES,
    # shortest first, so that as many targets as the time allows reach the
    # goal, the rest resumed next time.
    need = [t for t in targets if todo[t][0] != "keep"]
    rate = {r["target"]: r.get("exec_per_s") or 0 for r in prev}
    minutes = os.environ.get("FUZZ_BENCH_MINUTES") or ""
    boxed = minutes.isdigit() and int(minutes) > 0
    need.sort(key=lambda t: (todo[t][2] / rate[t] if rate.get(t) else float("inf")) * (1 if boxed else -1))
    kept = [t for t in targets if todo[t][0] == "keep"]
    say(f"fuzzing: {len(targets)} targets, {runs:,} executions each; the same binary's row kept: "
        f"{', '.join(kept) or 'none'}; resumed: {', '.join(t for t in need if todo[t][0] == 'resume') or 'none'}")
    rows_new = []
    rc = 0
    jobs = os.environ.get("FUZZ_JOBS") or str(os.cpu_count() or 1)
    # Fewer targets to run than jobs: each target as several processes on
    # its corpus, so that no core idles while the last ones run.
    workers = max(1, int(jobs) // len(need)) if need and jobs.isdigit() else 1
    if need:
        with tempfile.TemporaryDirectory(prefix="jankbpf-fuzz-") as tmp:
            lines = os.path.join(tmp, "fuzz.jsonl")
            # Targets side by side, one per CPU: each is one single-threaded
            # process, so its executions and exec/s are those of one core.
            env = {**os.environ, "FUZZ_BENCH_RUNS": str(runs), "FUZZ_JSON": lines, "FUZZ_JOBS": jobs,
                   "FUZZ_WORKERS": str(workers),
                   **{f"FUZZ_BENCH_RUNS_{t}": str(todo[t][2]) for t in need}}
            if boxed:
                env["FUZZ_BENCH_DEADLINE"] = str(int(time.time()) + 60 * int(minutes))
            rc = subprocess.run([os.path.join(config.ROOT, "scripts", "fuzz.sh"), "bench", *need],
                                cwd=config.ROOT, env=env, stdout=subprocess.DEVNULL).returncode
            rows_new = [json.loads(l) for l in open(lines)] if os.path.exists(lines) else []
    by_new = {r["target"]: r for r in rows_new}
    rows = []
    for t in targets:
        what, before, _ = todo[t]
        if what == "keep":
            r = dict(before)
        elif t in by_new:
            r = fuzz_rows.merged(before, by_new[t], here)
        else:
            continue
        if t in ids:
            r["build_id"], r["sha256"] = ids[t]
        if t in srcs:
            # The commit whose tree built this very binary (it ran here, or
            # its sha256 matched the row's): staleness counts from there.
            r["sources"], r["flags"], r["checked"] = srcs[t], flags, here
        rows.append(r)
    try:
        clang = subprocess.run(["clang++", "-dumpversion"], capture_output=True, text=True).stdout.strip()
    except OSError:
        clang = "?"
    cap = os.environ.get("FUZZ_BENCH_SECONDS") or None
    return {"runs": runs, "rc": rc, "clang": clang, "cpus": os.cpu_count(), "jobs": int(jobs), "workers": workers,
            "seconds_cap": int(cap) if cap and cap.isdigit() else None,
            "minutes_box": int(minutes) if boxed else None, "targets": rows,
            "kept": kept, "ran": need,
            "commands": [f"FUZZ_BENCH_RUNS={runs} FUZZ_JOBS={jobs} "
                         + (f"FUZZ_WORKERS={workers} " if workers > 1 else "")
                         + (f"FUZZ_BENCH_DEADLINE=<start + {minutes} min> " if boxed else "")
                         + " ".join(f"FUZZ_BENCH_RUNS_{t}={todo[t][2]}" for t in need if todo[t][2] != runs)
                         + f" scripts/fuzz.sh bench {' '.join(need)}"]}
