"""python3 -m jankbench (from bench/; scripts/bench.sh runs it): measures
the selected scenarios, stores each one's data in bench/results/, then
renders bench/RESULTS.md from every stored result and prints the summary.

  --only a,b / BENCH_ONLY=a,b   these scenarios (default: all, in run order)
  --skip a,b / BENCH_SKIP=a,b   all but these
  --render                      measure nothing: render what is stored
  --list                        the scenarios
  --check                       measure nothing: is the selection valid, and
                                may this tree be measured (scripts/bench.sh asks
                                before it installs or builds anything)
  BENCH_QUICK=1                 a smoke run, stored in build/bench/results-quick/ and
                                rendered to build/bench/RESULTS-quick.md
  BENCH_RESULTS=FILE            render there instead
  BENCH_RESULTS_DIR=DIR         store there instead

Every run builds what it measures from the tree it runs in (make all apps
unit-bin, and fuzz-bin for the fuzzers) and stores that build with each
scenario (builds.py): its commit, its uncommitted changes (a dirty tree is
recorded as dirty), jankbpf's version, build-id and hash. A full run (no
selection, not BENCH_QUICK) measures one commit: it refuses a dirty tree.

Exit status: 0 done; 1 a tool is missing or failed to attach, the build
failed, the bench broke (what was measured before is stored and rendered),
or a goal that fails the bench (the soak's, the fuzzers') was missed or
errs on data this run measured (in a full run: any such goal not met); 2 a
bad selection, or a full run asked of a dirty tree.
"""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

from . import builds, config, procs, runner, store
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
    out_dir = config.store_dir()
    md = os.environ.get("BENCH_RESULTS") or (config.QUICK_MD if config.QUICK else config.RESULTS_MD)
    return out_dir, md, [config.RESULTS_DIR] + ([out_dir] if out_dir != config.RESULTS_DIR else [])


def full_run(only: str, skip: str) -> bool:
    """Every scenario, at its full size: the run that must measure one commit."""
    return not config.QUICK and not (only or "").strip() and not (skip or "").strip()


def preflight(only: str, skip: str, tree: dict) -> str | None:
    """Why this run may not start here, or None."""
    if full_run(only, skip):
        return builds.refuse_dirty(tree)
    return None


def build_record(names: list[str], tree: dict) -> dict:
    """Builds what the scenarios run from this tree, then what identifies
    the jankbpf that will be measured (Fatal when it is not this tree's)."""
    if os.path.realpath(config.BUILD) != os.path.realpath(os.path.join(config.ROOT, "build")):
        raise Fatal(f"JANKBPF_BUILD={config.BUILD}: the bench measures the build of the tree it runs in "
                    f"({os.path.join(config.ROOT, 'build')}), which it builds itself")
    cross = builds.arm64_goals(names)
    say(f"building from the tree: make {' '.join(builds.make_goals(names))}"
        + (f", then make {' '.join(cross)}" if cross else ""))
    try:
        builds.build(names, os.path.join(config.BENCHBIN, "build.log"), tree["describe"])
    except RuntimeError as e:
        raise Fatal(str(e)) from e
    version = subprocess.run([config.JANKBPF, "--version"], capture_output=True, text=True).stdout.strip()
    if version != f"jankbpf {tree['describe']}":
        raise Fatal(f"{config.JANKBPF} says {version!r} after the build, not the tree's {tree['describe']}")
    if cross:
        arm64 = os.path.join(config.ROOT, "build", "arm64", "jankbpf")
        v64 = builds.arm64_version(arm64)
        if v64 != f"jankbpf {tree['describe']}":
            raise Fatal(f"{arm64} says {v64!r} after the build, not the tree's {tree['describe']}")
    return {"jankbpf_version": version, **{k: v for k, v in builds.binary(config.JANKBPF).items() if k != "path"}}


def check_binaries(names: list[str]) -> None:
    need = [config.JANKBPF, config.JANK_TARGET]
    if {"throughput", "where", "hooks", "tax", "startup"} & set(names):
        need += [config.PINGPONG, config.GETPPID]
    if "stacks" in names:
        need.append(config.STACK_TARGET)
    for f in need:
        if not os.access(f, os.X_OK):
            raise Fatal(f"{f} is missing: run `make bench`, which builds it")


def measure(names: list[str], out_dir: str, command: str, tree: dict) -> tuple[list[str], str | None]:
    """Builds, then runs and stores each scenario; (the ones stored, why the bench broke)."""
    try:
        build = build_record(names, tree)
        check_binaries(names)
    except Fatal as e:
        return [], str(e)
    machine = procs.machine()
    say(f"machine: {machine['kernel']}, {machine['cpu']} x{machine['cores']}, load {procs.loadavg()}"
        f"{' (BENCH_QUICK)' if config.QUICK else ''}; build {tree['describe']} ({build['jankbpf_version']}); "
        f"scenarios: {' '.join(names)}")
    ctx = Context(dict(os.environ))
    stored, broke = [], None
    try:
        if {"throughput", "where", "hooks"} & set(names):
            ctx.workloads()  # started first, so they are older than 10 s when measured
        for name in names:
            date, load0, t0 = procs.utc_now(), procs.loadavg(), time.monotonic()
            try:
                data = SCENARIOS[name](ctx)
            except NotMeasured as e:
                say(f"{name}: not measured ({e}); what is stored for it is kept")
                continue
            prov = store.provenance(date, tree, build, machine, config.QUICK, command, (load0, procs.loadavg()),
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
    ap.add_argument("--check", action="store_true")
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
    tree = builds.tree()
    refused = preflight(a.only, a.skip, tree)
    if refused:
        print(f"bench: refused: {refused}", file=sys.stderr)
        return 2
    if a.check:
        return 0
    if os.geteuid() != 0:
        print("bench: needs root (sudo make bench)", file=sys.stderr)
        return 1
    command = os.environ.get("BENCH_COMMAND") or shlex.join(["python3", "-m", "jankbench", *argv])
    stored, broke = measure(names, out_dir, command, tree)
    rows = render_to(md_path, read_dirs)
    if broke:
        print(f"bench: FAILED: {broke}", file=sys.stderr)
        return 1
    failing = failed_goals(rows, stored, full_run(a.only, a.skip))
    for r in failing:
        print(f"bench: goal {r['state']}: {r['goal']}: {r['figure']}", file=sys.stderr)
    return 1 if failing else 0


def failed_goals(rows: list[dict], stored: list[str], full: bool) -> list[dict]:
    """The goals that fail this run: a fails_bench goal not met, or in
    error, on data this run measured; in a full run, any fails_bench goal
    that is not met (not measured, stale and error included). A smoke run
    (BENCH_QUICK) is below the goals' sizes by design: only its errors fail."""
    out = []
    for r in rows:
        if not r["fails_bench"]:
            continue
        if config.QUICK:
            bad = r["state"] == "error" and set(r["needs"]) & set(stored)
        elif full:
            bad = r["state"] != "met"
        else:
            bad = r["state"] in ("not met", "error") and set(r["needs"]) & set(stored)
        if bad:
            out.append(r)
    return out


def guarded_main(result: list) -> None:
    try:
        result.append(main(sys.argv[1:]))
    except Fatal as e:
        print(f"bench: FAILED: {e}", file=sys.stderr)
        result.append(1)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        result.append(e.code if isinstance(e.code, int) else 1)
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
