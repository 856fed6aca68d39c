"""Which build a stored result measured, and whether it is still the code
of this checkout.

A run reads the tree once (commit, and every uncommitted change by its
blob hash), builds what it measures from that tree (`make`), and stores
both with each scenario. Rendering compares a stored build with the
checkout: a section is stale when a later commit, or an uncommitted change
other than the measured one, touches the code it measures (CODE). The
bench's own outputs (bench/results/, RESULTS.md) are not code: a tree
whose only changes are those is clean."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess

from . import config

# What each scenario measures: a change under these paths makes its stored
# figures stale. The product for every scenario; the fuzzers' harnesses too.
PRODUCT = ("src", "bpf", "include")
# What no scenario but the fuzzers runs: `jankbpf report` and the
# --report/--perfetto/--folded sinks (made only when those flags are given,
# and no scenario gives them). A change there leaves the others' figures be.
NOT_MEASURED = (":(exclude)src/report",)
CODE = {"fuzz": ("src", "include", "tests/fuzz")}

# The bench's own outputs: never part of the code a run measures.
OUTPUTS = ("bench/results/", "bench/RESULTS.md")


def code_of(scenario: str) -> tuple[str, ...]:
    """The paths a scenario's figures depend on, as git pathspecs (an
    `:(exclude)` one takes a part back out)."""
    return CODE.get(scenario, PRODUCT + NOT_MEASURED)


def _excluded(paths) -> tuple[list[str], list[str]]:
    inc = [p for p in paths if not p.startswith(":(exclude)")]
    exc = [p[len(":(exclude)"):] for p in paths if p.startswith(":(exclude)")]
    return inc, exc


def under(path: str, paths) -> bool:
    inc, exc = _excluded(paths)
    within = lambda ps: any(path == p or path.startswith(p.rstrip("/") + "/") for p in ps)
    return within(inc) and not within(exc)


def shown(paths) -> str:
    """Pathspecs as a reader says them: 'src, bpf, include (not src/report)'."""
    inc, exc = _excluded(paths)
    return ", ".join(inc) + (f" (not {', '.join(exc)})" if exc else "")


class Git:
    """The git questions the bench asks of the checkout at ROOT."""

    def __init__(self, root: str = config.ROOT):
        self.root = root

    def _run(self, *args, input_text=None) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", self.root, *args], capture_output=True, text=True,
                              input=input_text)

    def out(self, *args) -> str:
        return self._run(*args).stdout.strip()

    def head(self) -> str:
        return self.out("rev-parse", "HEAD")

    def is_ancestor(self, commit: str, of: str = "HEAD") -> bool:
        return self._run("merge-base", "--is-ancestor", commit, of).returncode == 0

    def commits_since(self, commit: str, paths) -> list[str]:
        """'short subject' of each commit after `commit` up to HEAD touching paths, newest first."""
        text = self.out("log", "--format=%h %s", f"{commit}..HEAD", "--", *paths)
        return [l for l in text.splitlines() if l.strip()]

    def dirty_files(self) -> dict[str, str]:
        """Every uncommitted change but the bench's outputs: path -> blob hash
        of its content now ('deleted' when gone). Untracked files count:
        the Makefile builds every source file it finds."""
        text = self._run("status", "--porcelain=v1", "-z", "--untracked-files=all").stdout
        entries = text.split("\0")
        paths, i = [], 0
        while i < len(entries):
            e = entries[i]
            i += 1
            if len(e) < 4:
                continue
            status, path = e[:2], e[3:]
            if status[0] in "RC":
                i += 1  # the rename's source follows
            if not any(path == o or path.startswith(o) for o in OUTPUTS):
                paths.append(path)
        out = {}
        present = [p for p in paths if os.path.lexists(os.path.join(self.root, p))]
        if present:
            blobs = self._run("hash-object", "--stdin-paths", input_text="\n".join(present) + "\n").stdout.split()
            out.update(zip(present, blobs))
        out.update({p: "deleted" for p in paths if p not in out})
        return out


def tree(git: Git | None = None) -> dict:
    """The checkout a run measures, read once when it starts."""
    git = git or Git()
    full = git.head() or "?"
    dirty = git.dirty_files()
    describe = git.out("describe", "--always") or full[:7]
    return {"commit": full[:7], "commit_full": full, "describe": describe + ("-dirty" if dirty else ""),
            "dirty": bool(dirty), "dirty_files": dirty}


def refuse_dirty(tree_: dict) -> str | None:
    """Why a full run may not measure this tree, or None."""
    if not tree_.get("dirty"):
        return None
    files = sorted(tree_["dirty_files"])
    shown = ", ".join(files[:8]) + (f" and {len(files) - 8} more" if len(files) > 8 else "")
    return (f"a full run measures one commit, and the tree has uncommitted changes ({shown}): commit or "
            "stash them, or measure some scenarios with BENCH_ONLY (recorded as a dirty build)")


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def elf_build_id(path: str) -> str:
    """The GNU build-id note of an ELF file ('' when it has none)."""
    try:
        out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    except OSError:
        return ""
    m = re.search(r"Build ID:\s*([0-9a-f]+)", out)
    return m.group(1) if m else ""


def binary(path: str) -> dict:
    """What identifies one built binary: its build-id and its bytes."""
    return {"path": os.path.relpath(path, config.ROOT), "build_id": elf_build_id(path), "sha256": sha256(path)}


def make_goals(names: list[str]) -> list[str]:
    """The make goals whose outputs the selected scenarios run."""
    goals = ["all", "apps", "unit-bin"]
    if "fuzz" in names:
        goals.append("fuzz-bin")
    return goals


# Scenarios that boot the arm64 lane kernel with build/arm64's jankbpf.
ARM64_SCENARIOS = ("lane_causes",)


def arm64_goals(names: list[str]) -> list[str]:
    """The arm64 cross-build's make arguments, when a selected scenario runs
    it (x86_64 hosts: the lane boots arm64 under qemu)."""
    if os.uname().machine != "x86_64" or not set(ARM64_SCENARIOS) & set(names):
        return []
    return ["ARCH=arm64", "all", "apps"]


def build(names: list[str], log_path: str, describe: str) -> None:
    """Builds what the scenarios run from this tree (make: only what
    changed), the arm64 tree too for a scenario that boots it, each
    jankbpf's --version the tree's `describe` (dirty only for changes to
    code, not for the bench's own outputs). Raises RuntimeError with the
    log's tail when make fails."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    jobs = f"-j{min(os.cpu_count() or 1, 2)}"
    with open(log_path, "w") as log:
        for goals in (make_goals(names), arm64_goals(names)):
            if not goals:
                continue
            rc = subprocess.run(["make", "--no-print-directory", jobs, "-C", config.ROOT, f"VERSION={describe}",
                                 *goals], stdout=log, stderr=subprocess.STDOUT).returncode
            if rc != 0:
                tail = "".join(open(log_path, errors="replace").readlines()[-20:])
                raise RuntimeError(f"make {' '.join(goals)} failed (exit {rc}; {log_path}):\n{tail}")


def arm64_version(binary: str) -> str:
    """The arm64 jankbpf's --version, run under qemu-user (arm64-deps)."""
    qemu = "/usr/bin/qemu-aarch64-static"
    if not os.access(qemu, os.X_OK):
        return f"(no {qemu} to ask {binary})"
    r = subprocess.run([qemu, "-L", "/usr/aarch64-linux-gnu", binary, "--version"], capture_output=True,
                       text=True, timeout=60)
    return r.stdout.strip() or f"(exit {r.returncode}: {r.stderr.strip()[:200]})"


def version_commit(version: str) -> str:
    """The commit part of `jankbpf --version` ('jankbpf 06559b7-dirty' -> '06559b7')."""
    word = version.split()[-1] if version.split() else ""
    return re.sub(r"-dirty$", "", word)


def stale_reason(prov: dict, paths, git) -> str | None:
    """Why a stored result no longer measures this checkout's code under
    `paths`, or None when it does."""
    commit = prov.get("commit_full") or prov.get("commit")
    if not commit:
        return "it records no commit"
    if not git.is_ancestor(commit):
        return f"it was measured on {commit[:7]}, which is not in this checkout's history"
    later = git.commits_since(commit, paths)
    if later:
        return (f"{len(later)} later {'commits change' if len(later) > 1 else 'commit changes'} {shown(paths)} "
                f"(newest: {later[0]})")
    measured = (prov.get("build") or {}).get("jankbpf_version") or (prov.get("machine") or {}).get("jankbpf")
    if measured and version_commit(measured) and not commit.startswith(version_commit(measured)):
        return f"the binary it measured was {measured}, not the tree's {commit[:7]}"
    if "dirty_files" not in prov:
        # Stored before builds were recorded: fresh only as a clean tree's
        # result whose jankbpf said it was built from that same clean commit.
        if str(prov.get("describe", "")).endswith("-dirty"):
            return "it was measured on a dirty tree whose changes were not recorded"
        if not measured or measured.endswith("-dirty"):
            return "the build it measured was not recorded"
        then = {}
    else:
        then = {p: b for p, b in prov["dirty_files"].items() if under(p, paths)}
    now = {p: b for p, b in git.dirty_files().items() if under(p, paths)}
    if then != now:
        changed = sorted(set(then) ^ set(now) | {p for p in then.keys() & now.keys() if then[p] != now[p]})
        return (f"the tree's uncommitted changes to {', '.join(changed[:4])}"
                f"{' …' if len(changed) > 4 else ''} are not the measured build's")
    return None
