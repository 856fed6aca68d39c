"""Process bookkeeping (nothing is left behind) and what the bench reads
from /proc and bpftool."""
from __future__ import annotations

import datetime
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time

from . import config


class Fatal(Exception):
    """A needed tool is missing or failed to attach: the bench fails."""


class NotMeasured(Exception):
    """The scenario could not measure here (e.g. no kernel lane): what is
    stored for it is kept, and the bench goes on."""


T0 = time.monotonic()


def say(msg: str) -> None:
    print(f"[bench {time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


# ---- process bookkeeping ----------------------------------------------------

_children: list[subprocess.Popen] = []


def spawn(argv, **kw) -> subprocess.Popen:
    p = subprocess.Popen(argv, **kw)
    _children.append(p)
    return p


def stop(p: subprocess.Popen, sig=signal.SIGTERM, timeout=30.0) -> float:
    """Signals p (if alive) and waits; returns the seconds it took to exit."""
    t = time.monotonic()
    if p.poll() is None:
        try:
            p.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)
    took = time.monotonic() - t
    wait_kernel_closes()
    return took


# jankbpf leaves its perf events for the kernel to close after its exit
# (src/bpf/perf_keeper.h); until its worker has closed them the tracepoints
# stay registered. What comes next is measured once none is seen closing.
_CLOSING = re.compile(r"perf_trace_destroy|perf_release|perf_event_release_kernel|delayed_fput")


def wait_kernel_closes(timeout=20.0) -> float:
    """Waits until no task's kernel stack is in a perf event's release, two
    polls in a row; the seconds waited."""
    t = time.monotonic()
    clean = 0
    while clean < 2 and time.monotonic() - t < timeout:
        busy = False
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stack") as f:
                    if _CLOSING.search(f.read()):
                        busy = True
                        break
            except OSError:
                pass
        clean = 0 if busy else clean + 1
        time.sleep(0.02)
    return time.monotonic() - t


def cleanup() -> None:
    import jankrun
    jankrun.stop_all(signal.SIGTERM, 15)
    for p in reversed(_children):
        if p.poll() is None:
            stop(p, signal.SIGTERM, 15)


def run(argv, **kw) -> str:
    """Runs a command to completion (registered, so an interrupted bench
    stops it too); its stdout, or CalledProcessError."""
    p = spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    out, err = p.communicate()
    _children.remove(p)
    if p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, argv, out, err)
    return out


# ---- /proc ------------------------------------------------------------------

def thread_cpu_ns(pid: int) -> dict[int, int]:
    """tid -> on-CPU ns (schedstat) of each thread of pid now."""
    out = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    out[int(tid)] = int(f.read().split()[0])
            except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
                pass
    except FileNotFoundError:
        pass
    return out


def proc_cpu_ns(pid: int) -> int:
    """On-CPU ns of every thread of pid (schedstat: ns, not clock ticks)."""
    return sum(thread_cpu_ns(pid).values())


def grown(before: dict, after: dict, key=None) -> int:
    """What counters keyed by id (threads, programs) gained between two
    reads, per id: one gone by the later read (an exited thread, a closed
    program) is left out, its share of the window unknown, so that the sum
    never goes negative; one new in the later read counts whole."""
    val = (lambda v: v) if key is None else (lambda v: v[key])
    return sum(max(0, val(v) - (val(before[i]) if i in before else 0)) for i, v in after.items())


def proc_cpu_split_ns(pid: int) -> tuple[int, int]:
    """(own, children) CPU of a process: utime + stime with exited threads
    included, and cutime + cstime of its waited-for children (trace-cmd):
    /proc/PID/stat, in clock ticks (10 ms)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = 1000000000 // os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) * tick, (int(fields[13]) + int(fields[14])) * tick


def proc_counters(pid: int) -> dict:
    """CPU ns, context switches (all threads), peak and current RSS."""
    own, child = proc_cpu_split_ns(pid)
    c = {"cpu_ns": own, "child_ns": child, "vol": 0, "nonvol": 0, "hwm_kb": 0, "rss_kb": 0, "threads": 0}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    k, _, v = line.partition(":")
                    if k == "voluntary_ctxt_switches":
                        c["vol"] += int(v)
                    elif k == "nonvoluntary_ctxt_switches":
                        c["nonvol"] += int(v)
            c["threads"] += 1
        except FileNotFoundError:
            pass
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k == "VmHWM":
                c["hwm_kb"] = int(v.split()[0])
            elif k == "VmRSS":
                c["rss_kb"] = int(v.split()[0])
    return c


def proc_age_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    return up - start_ticks / os.sysconf("SC_CLK_TCK")


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# ---- BPF --------------------------------------------------------------------

def bpf_prog_ids(pid: int) -> set[int]:
    """Ids of the BPF programs a process holds open (fdinfo of bpf-prog fds)."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf-prog":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                m = re.search(r"^prog_id:\s*(\d+)", f.read(), re.M)
            if m:
                ids.add(int(m.group(1)))
        except (FileNotFoundError, OSError):
            pass
    return ids


def bpftool_json(*args):
    return json.loads(run(["bpftool", "-j", *args]) or "[]")


def perf_attachments(pid: int) -> dict[int, str]:
    """prog id -> tracepoint/event name, for perf-event attachments of pid;
    a program on several tracepoints (jankbpf's shared wait hooks) gets
    them all, as sys_enter_{epoll_wait,ppoll,...}."""
    names: dict[int, list[str]] = {}
    for a in bpftool_json("perf", "list"):
        if a.get("pid") == pid:
            n = a.get("tracepoint") or a.get("event") or a.get("fd_type", "?")
            if n not in names.setdefault(a["prog_id"], []):
                names[a["prog_id"]].append(n)
    out = {}
    for pid_, ns in names.items():
        if len(ns) == 1:
            out[pid_] = ns[0]
            continue
        head = os.path.commonprefix(ns)
        head = head[:head.rfind("_") + 1] if "_" in head else ""
        out[pid_] = head + "{" + ",".join(sorted(n[len(head):] for n in ns)) + "}"
    return out


def prog_names(ids) -> dict[int, str]:
    return {p["id"]: p.get("name", "?") for p in bpftool_json("prog", "show") if p["id"] in set(ids)}


def prog_stats(pid: int) -> dict[int, dict]:
    """id -> {run_cnt, run_time_ns} of the BPF programs a process holds,
    from /proc/PID/fdinfo (cheap: no bpftool between two workload runs)."""
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf-prog":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
            out[int(info["prog_id"])] = {"run_cnt": int(info.get("run_cnt", 0)),
                                         "run_time_ns": int(info.get("run_time_ns", 0))}
        except (FileNotFoundError, OSError, KeyError, ValueError):
            pass
    return out


TRACING_TYPES = {"tracepoint", "raw_tracepoint", "tracing", "perf_event", "kprobe"}


def foreign_tracers(own: set[int]) -> int:
    """BPF tracing programs loaded by someone else (another session's
    jankbpf or tracer would tax the baseline too): counted per run."""
    return sum(1 for p in bpftool_json("prog", "show")
               if p.get("type") in TRACING_TYPES and p["id"] not in own)


def read_sysctl(name: str) -> str:
    with open("/proc/sys/" + name.replace(".", "/")) as f:
        return f.read().strip()


def write_sysctl(name: str, value: str) -> None:
    with open("/proc/sys/" + name.replace(".", "/"), "w") as f:
        f.write(value)


# ---- the machine ------------------------------------------------------------

def machine() -> dict:
    """What a result was measured on: kernel, CPU, memory, OS, tool versions."""
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    os_name = "?"
    if os.path.exists("/etc/os-release"):
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')

    def ver(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True).stdout.strip().splitlines()[0]
        except (OSError, IndexError):
            return "?"
    return {"kernel": platform.release(), "cpu": cpu, "cores": os.cpu_count(),
            "mem_gib": round(mem_kb / 1048576, 1), "os": os_name,
            "jankbpf": ver([config.JANKBPF, "--version"]), "bpftrace": ver(["bpftrace", "--version"]),
            "redis": ver(["redis-server", "--version"]).split(" sha")[0],
            "bcc": ver(["dpkg-query", "-W", "-f=${Version}", "python3-bpfcc"])}


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
