"""Which fuzz rows still measure this checkout's fuzzers, target by target.

10,000,000 executions of every target take hours on the bench host (the
report and stack-tree targets ~1,300–3,000 executions a second), so a
full run cannot redo them all each time. A target's row is the record of
one binary: the bench keeps it when the binary it builds from this tree is
byte for byte the one that ran (same sha256), and resumes a row cut short
on that same binary with the executions it still lacks. Rendering judges a
row fresh while no later commit touches a file its objects were compiled
from (their make dependency files) and the compiler flags are the same;
the binary itself is compared when the bench runs again.
"""
from __future__ import annotations

import os
import subprocess

from . import config
from .goals import fuzz_interrupted

# Beyond the objects' sources: what the Makefile's fuzz rules feed clang.
EXTRA_SOURCES = ("tests/fuzz/coverage-ignore.txt",)


def make_layout(root: str = config.ROOT) -> tuple[dict[str, tuple[list[str], str]], str]:
    """({target: (its src/ objects, its libraries)}, the compile command's
    flags), from `make fuzz-srcs`. Raises RuntimeError when make fails."""
    p = subprocess.run(["make", "--no-print-directory", "-s", "-C", root, "fuzz-srcs"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"make fuzz-srcs failed (exit {p.returncode}): {p.stderr.strip()[-300:]}")
    targets, flags = {}, ""
    for line in p.stdout.splitlines():
        parts = line.split("|")
        if len(parts) == 2 and parts[0] == "flags":
            flags = " ".join(parts[1].split())
        elif len(parts) == 3:
            targets[parts[0].strip()] = (parts[1].split(), " ".join(parts[2].split()))
    return targets, flags


def dep_files(d_path: str, root: str = config.ROOT) -> list[str]:
    """The repository files a make dependency file (-MMD) names for its
    object: the first rule's prerequisites, as paths relative to root;
    system headers and generated files under build/ left out."""
    with open(d_path) as f:
        text = f.read().replace("\\\n", " ")
    first = text.split("\n", 1)[0]
    _, _, deps = first.partition(":")
    out = []
    for dep in deps.split():
        path = os.path.relpath(os.path.normpath(os.path.join(root, dep)), root)
        if not path.startswith("..") and not os.path.isabs(path) and not path.startswith("build/"):
            out.append(path)
    return out


def sources(target: str, objs: list[str], fuzz_out: str, root: str = config.ROOT) -> list[str]:
    """Every repository file the target's binary was compiled from, sorted.
    Raises OSError when a dependency file is missing (not built)."""
    files = set(EXTRA_SOURCES)
    files.update(dep_files(os.path.join(fuzz_out, "harness", f"{target}.d"), root))
    for o in objs:
        files.update(dep_files(os.path.join(fuzz_out, "obj", f"{o}.d"), root))
    return sorted(files)


def failed(row: dict) -> bool:
    """A crash, leak, timeout or out-of-memory: not a run cut short."""
    return not fuzz_interrupted(row) and bool(row["crashes"] or row["rc"])


def met(row: dict, runs: int) -> bool:
    return row["executions"] >= runs and not failed(row)


def plan(prev: list[dict], ids: dict[str, tuple[str, str]], targets: list[str], runs: int) -> dict:
    """What each target needs this run, from the rows stored before and
    each freshly built binary's (build-id, sha256): 'keep' a row of the
    same binary that met the goal or failed (a finding stays one until the
    binary changes), 'resume' one of the same binary cut short (it runs the
    executions still missing), 'run' anything else. {target: (what, row
    or None, executions to run)}."""
    by = {r["target"]: r for r in prev}
    out = {}
    for t in targets:
        r = by.get(t)
        same = r is not None and t in ids and r.get("sha256") == ids[t][1]
        if same and (met(r, runs) or failed(r)):
            out[t] = ("keep", r, 0)
        elif same:
            out[t] = ("resume", r, runs - r["executions"])
        else:
            out[t] = ("run", None, runs)
    return out


def merged(before: dict | None, new: dict, run: dict) -> dict:
    """A target's row after this run: its executions, seconds and runs added
    to those of the row it resumes; exec/s over the sum; this run's exit,
    crashes and corpus. `run` says where and when it ran (commit, date).
    A run of several workers (processes on one corpus) counts all their
    executions over its wall seconds."""
    entry = {**run, "executions": new["executions"], "seconds": new["seconds"], "rc": new["rc"],
             "workers": new.get("workers", 1)}
    if new.get("starved"):  # timeouts the host's load made (scripts/fuzz.sh: replay_timeouts)
        entry["starved"] = new["starved"]
    if before is None:
        return {**new, "runs": [entry]}
    execs = before["executions"] + new["executions"]
    secs = before["seconds"] + new["seconds"]
    earlier = before.get("runs") or [{"commit": "?", "executions": before["executions"],
                                      "seconds": before["seconds"], "rc": before["rc"]}]
    return {**new, "executions": execs, "seconds": round(secs, 1),
            "exec_per_s": int(execs / secs) if secs > 0 else new["exec_per_s"], "runs": [*earlier, entry]}


def row_stale(row: dict, git, flags_now: str | None) -> str | None:
    """Why a row no longer measures this checkout's fuzzer, or None. A row
    without its sources (stored before they were) has no answer: None, and
    the section's own provenance decides (builds.stale_reason)."""
    if "sources" not in row:
        return None
    commit = (row.get("checked") or (row.get("runs") or [{}])[-1]).get("commit")
    if not commit or commit == "?":
        return "it records no commit"
    if not git.is_ancestor(commit):
        return f"it ran on {commit[:7]}, which is not in this checkout's history"
    later = git.commits_since(commit, row["sources"])
    if later:
        return f"{len(later)} later commit(s) change its sources (newest: {later[0]})"
    dirty = sorted(p for p in git.dirty_files() if p in row["sources"])
    if dirty:
        return f"uncommitted changes to {', '.join(dirty[:3])}"
    if flags_now is not None and row.get("flags") != flags_now:
        return "the Makefile compiles the fuzzers with other flags now"
    return None


def section_stale(data: dict, git, flags_now: str | None) -> str | None | bool:
    """The fuzz section's staleness from its rows: the reasons of the stale
    ones, None when every row is fresh, False when some row has no sources
    (then the section's provenance decides)."""
    rows = data.get("targets") or []
    if not rows or any("sources" not in r for r in rows):
        return False
    why = [f"{r['target']}: {w}" for r in rows if (w := row_stale(r, git, flags_now))]
    return "; ".join(why) or None


def current_flags(root: str = config.ROOT) -> str | None:
    try:
        return make_layout(root)[1]
    except (RuntimeError, OSError):
        return None
