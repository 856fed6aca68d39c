"""python3 -m jankbench (from bench/; scripts/bench.sh runs it): measures
the selected scenarios, stores each one's data in bench/results/, then
renders bench/RESULTS.md from every stored result and prints the summary.

  --only a,b / BENCH_ONLY=a,b   these scenarios (default: all, in run order)
  --skip a,b / BENCH_SKIP=a,b   all but these
  --render                      measure nothing: render what is stored
  --list                        the scenarios
  BENCH_QUICK=1                 a smoke run, stored in build/bench/results-quick/ and
                                rendered to build/bench/RESULTS-quick.md
  BENCH_RESULTS=FILE            render there instead
  BENCH_RESULTS_DIR=DIR         store there instead

Exit status: 0 done; 1 a tool is missing or failed to attach, the bench
broke (what was measured before is stored and rendered), or a goal that
fails the bench (the soak's, the fuzzers') was missed; 2 a bad selection.
"""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import threading
import time

from . import config, procs, runner, store
from .procs import Fatal, NotMeasured, say
from .report import render
from .scenarios import SCENARIOS, Context


def selection(only: str, skip: str) -> list[str]:
    def names(s):
        return [n.strip() for n in (s or "").split(",") if n.strip()]
    bad = [n for n in names(only) + names(skip) if n not in SCENARIOS]
    if bad:
        raise SystemExit(f"bench: unknown scenario {', '.join(bad)} (scenarios: {', '.join(SCENARIOS)})")
    chosen = names(only) or list(SCENARIOS)
    return [n for n in SCENARIOS if n in chosen and n not in names(skip)]


def paths() -> tuple[str, str, list[str]]:
    """(directory to store in, markdown to write, directories to render from)."""
    out_dir = os.environ.get("BENCH_RESULTS_DIR") or (config.QUICK_DIR if config.QUICK else config.RESULTS_DIR)
    md = os.environ.get("BENCH_RESULTS") or (config.QUICK_MD if config.QUICK else config.RESULTS_MD)
    return out_dir, md, [config.RESULTS_DIR] + ([out_dir] if out_dir != config.RESULTS_DIR else [])


def check_binaries(names: list[str]) -> None:
    need = [config.JANKBPF, config.JANK_TARGET]
    if {"throughput", "hooks", "tax", "startup"} & set(names):
        need += [config.PINGPONG, config.GETPPID]
    if "stacks" in names:
        need.append(config.STACK_TARGET)
    for f in need:
        if not os.access(f, os.X_OK):
            raise Fatal(f"{f} is missing: run `make bench`, which builds it")


def measure(names: list[str], out_dir: str, command: str) -> tuple[list[str], str | None]:
    """Runs and stores each scenario; (the ones stored, why the bench broke)."""
    machine, tree = procs.machine(), store.tree()
    say(f"machine: {machine['kernel']}, {machine['cpu']} x{machine['cores']}, load {procs.loadavg()}"
        f"{' (BENCH_QUICK)' if config.QUICK else ''}; scenarios: {' '.join(names)}")
    ctx = Context(dict(os.environ))
    stored, broke = [], None
    try:
        if {"throughput", "hooks"} & set(names):
            ctx.workloads()  # started first, so they are older than 10 s when measured
        for name in names:
            date, load0, t0 = procs.utc_now(), procs.loadavg(), time.monotonic()
            try:
                data = SCENARIOS[name](ctx)
            except NotMeasured as e:
                say(f"{name}: not measured ({e}); what is stored for it is kept")
                continue
            prov = store.provenance(date, tree, machine, config.QUICK, command, (load0, procs.loadavg()),
                                    time.monotonic() - t0)
            say(f"{name}: stored in {store.save(out_dir, name, data, prov)}")
            stored.append(name)
    except Fatal as e:
        broke = str(e)
    finally:
        ctx.close()
        runner.remove_logs()
    return stored, broke


def render_to(md_path: str, read_dirs: list[str]) -> list[dict]:
    note = ("This rendering includes BENCH_QUICK=1 smoke runs (their sections say so): not the "
            "committed figures." if config.QUICK else "")
    md, term, rows = render(store.load(*read_dirs), note)
    print(term)
    os.makedirs(os.path.dirname(os.path.abspath(md_path)), exist_ok=True)
    with open(md_path, "w") as f:
        f.write(md)
    say(f"wrote {md_path}")
    return rows


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="jankbench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=os.environ.get("BENCH_ONLY", ""))
    ap.add_argument("--skip", default=os.environ.get("BENCH_SKIP", ""))
    ap.add_argument("--render", action="store_true")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args(argv)
    if a.list:
        print("\n".join(SCENARIOS))
        return 0
    try:
        names = selection(a.only, a.skip)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    out_dir, md_path, read_dirs = paths()
    if a.render:
        render_to(md_path, read_dirs)
        return 0
    if os.geteuid() != 0:
        print("bench: needs root (sudo make bench)", file=sys.stderr)
        return 1
    check_binaries(names)
    command = os.environ.get("BENCH_COMMAND") or shlex.join(["python3", "-m", "jankbench", *argv])
    stored, broke = measure(names, out_dir, command)
    rows = render_to(md_path, read_dirs)
    if broke:
        print(f"bench: FAILED: {broke}", file=sys.stderr)
        return 1
    missed = [r for r in rows if r["fails_bench"] and r["state"] == "not met"
              and set(r["needs"]) & set(stored)]
    for r in missed:
        print(f"bench: goal missed: {r['goal']}: {r['figure']}", file=sys.stderr)
    return 1 if missed else 0


def guarded_main(result: list) -> None:
    try:
        result.append(main(sys.argv[1:]))
    except Fatal as e:
        print(f"bench: FAILED: {e}", file=sys.stderr)
        result.append(1)
    except BaseException as e:  # noqa: BLE001 - reported, then the bench fails
        import traceback
        traceback.print_exc()
        result.append(1 if not isinstance(e, KeyboardInterrupt) else 130)


def entry() -> None:
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, lambda *_: sys.exit(130))
    # scripts/bench.sh starts us in the background, where SIGINT arrives
    # ignored: take it back, so Ctrl-C stops the bench.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # The bench runs in a worker thread: jankbpf watches main threads, and
    # the bench's own main thread then never enters an event-loop wait, so
    # the bench process is never one of the "tasks" it measures.
    result: list[int] = []
    worker = threading.Thread(target=guarded_main, args=(result,), daemon=True)
    rc = 130
    try:
        worker.start()
        while worker.is_alive():
            worker.join(0.5)
        rc = result[0] if result else 1
    except (KeyboardInterrupt, SystemExit):
        print("bench: interrupted", file=sys.stderr)
    finally:
        # A second signal (Ctrl-C again, scripts/bench.sh's SIGTERM) must
        # not cut the cleanup short.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        procs.cleanup()
        runner.remove_logs()
    sys.stdout.flush()
    os._exit(rc)


if __name__ == "__main__":
    entry()
