"""Runs jankbpf and collects its records, for the end-to-end tests."""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("JANKBPF_BUILD", os.path.join(ROOT, "build"))
JANKBPF = os.path.join(BUILD, "jankbpf")
TARGET = os.path.join(BUILD, "tests", "jank_target")


# The runner is shared with the bench (bench/jankbench): tests/pylib/jankrun.py.
sys.path.insert(0, os.path.join(ROOT, "tests", "pylib"))
from jankrun import RUNNING, Jankbpf, stop_all  # noqa: E402,F401  (re-exported)
from jankrun import with_log_dir as _with_log_dir  # noqa: E402


def run_jankbpf(*args, timeout=60, env=None, prefix=()):
    """Runs jankbpf to completion: (returncode, records, stderr). `env`
    adds variables (e.g. JANKBPF_DISABLE) to this process's environment;
    `prefix` runs it under another command (e.g. taskset)."""
    full_env = {**os.environ, **env} if env else None
    p = subprocess.run([*prefix, JANKBPF, *_with_log_dir(args)], capture_output=True, text=True,
                       timeout=timeout, env=full_env)
    records = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    return p.returncode, records, p.stderr


def _bpftool(*args):
    out = subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def jankbpf_program_ids():
    """Ids of loaded BPF programs named like jankbpf's (jb_*)."""
    return {p["id"] for p in _bpftool("prog", "list") if p.get("name", "").startswith("jb_")}


def _held_ids(pid, keys):
    """{key: ids} of the BPF objects process `pid` holds open, from the
    `prog_id:`/`link_id:`/`map_id:` lines of /proc/PID/fdinfo."""
    held = {k: set() for k in keys}
    fdinfo = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(fdinfo):
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if key in held:
                        held[key].add(int(value))
        except OSError:
            pass
    return held


def held_bpf_ids(pid):
    """(program ids, link ids) of the BPF objects process `pid` holds open,
    from /proc/PID/fdinfo: exactly this jankbpf's, whatever else runs."""
    held = _held_ids(pid, ("prog_id", "link_id"))
    return held["prog_id"], held["link_id"]


def held_map_ids(pid):
    """Ids of the BPF maps process `pid` holds open (/proc/PID/fdinfo)."""
    return _held_ids(pid, ("map_id",))["map_id"]


def _left_after(ids_now, timeout):
    """Polls ids_now() (the ids still loaded, of those asked about) for up
    to `timeout` s (the kernel frees after an RCU grace period)."""
    deadline = time.monotonic() + timeout
    while True:
        left = ids_now()
        if not any(left) or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def maps_still_loaded(maps, timeout=5.0):
    """Which of these map ids are still in the kernel after up to `timeout` s."""
    return _left_after(lambda: (maps & {m["id"] for m in _bpftool("map", "list")},), timeout)[0]


def loaded_ids():
    """(program ids, link ids) loaded in the kernel now."""
    return ({p["id"] for p in _bpftool("prog", "list")},
            {l["id"] for l in _bpftool("link", "list")})


def still_loaded(progs, links, timeout=5.0):
    """Which of these program and link ids are still in the kernel, after
    giving it up to `timeout` s (it frees them after an RCU grace period)."""
    def now():
        loaded_progs, loaded_links = loaded_ids()
        return (loaded_progs & progs, loaded_links & links)
    return _left_after(now, timeout)


def link_ids_of(prog_ids):
    """Ids of BPF links whose program is one of prog_ids."""
    return {l["id"] for l in _bpftool("link", "list") if l.get("prog_id") in prog_ids}


def ms(ns):
    return ns / 1e6


# How far the kernel's span of a task may be from the app's own clock reads
# around it: one fixed number, the same for every task length (nothing in
# the difference grows with the task). What runs between the app's clock
# read and the wait or probe that bounds the task is in one span and not
# the other: a preemption there makes the kernel's span longer (after the
# app's last read, or between a wait's return and the app's first read) or
# shorter (a probe that begins a marker task after the app's first read).
# The targets run at nice -20 or SCHED_FIFO, so such a preemption ends at
# the preempting task's next scheduler tick: 4 ms at this kernel's HZ=250.
# Seen: +2.8 ms (a GLib round, CI), -1.27 ms (a marker task, CI), and
# +4.06 ms (a jank_target spin, CI, the machine loaded by the suites beside
# e2e): for jank_target's tasks, close_to_task adds the run delay its
# thread's schedstat counted across the task's two waits.
SPAN_MS = 4.0


def close_to_app(kernel_ms, app_ms):
    """The kernel's span of a task against the app's own: within SPAN_MS."""
    return abs(kernel_ms - app_ms) <= SPAN_MS


def close_to_task(kernel_ms, task):
    """The kernel's span of a jank_target task against the target's own
    clock: within SPAN_MS, and longer by at most SPAN_MS plus what the
    target's schedstat says its thread waited for a CPU across the two
    waits that bound the task (edge_delay_ns: a preemption between a wait's
    syscall and the target's clock read, as the kernel itself counted it;
    it also holds the wakeup delays inside those waits, so it only widens
    the bound on a loaded machine, never on a quiet one)."""
    diff = kernel_ms - task["dur_ns"] / 1e6
    return -SPAN_MS <= diff <= SPAN_MS + task["edge_delay_ns"] / 1e6


def need(ok, why):
    """A test that cannot run here: a failure under CI (CI=true), where the
    machine has what every test needs; elsewhere a skip that says why."""
    import pytest
    if ok:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"cannot run under CI: {why}")
    pytest.skip(why)
