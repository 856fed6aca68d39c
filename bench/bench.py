#!/usr/bin/python3
"""jankbpf benchmark: cost and accuracy, side by side with a bpftrace script
and a BCC tool doing the same detection. Run through `sudo make bench`
(scripts/bench.sh installs the bench-only packages and builds the bench
programs first); it prints a table and rewrites bench/RESULTS.md.

Sections (numbers as in issue 5):
  1. throughput: redis-server (GET/SET, pipelining off and on) and an epoll
     ping-pong pair, with nothing attached / jankbpf / jankbpf --log-type 2
     (no stacks) / bench/jank.bt, interleaved A B C D A B C D
  2. per-hook cost from bpf_stats (kernel.bpf_stats_enabled=1, restored)
  3. startup: exec -> attached, jankbpf / bpftrace / BCC
  4. jankbpf's footprint: idle, and with a target janking every 200 ms
  5. accuracy and latency on jank_target's scripted tasks
  6. ns per getppid() in an unwatched process, A B A C A D A
  7. stacks: jankbpf end to end, the stack library alone, bpftrace's ustack,
     the Python frame reader's cost per capture

BENCH_QUICK=1: fewer rounds and shorter windows (a smoke run).
BENCH_RESULTS=FILE: write the report there instead of bench/RESULTS.md.
Exit status: 0 done; 1 a needed tool is missing or failed to attach, or the
bench broke (RESULTS.md is then left as it was).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("JANKBPF_BUILD", os.path.join(ROOT, "build"))
JANKBPF = os.path.join(BUILD, "jankbpf")
UNIT = os.path.join(BUILD, "jankbpf-unit")
BENCHBIN = os.path.join(BUILD, "bench")
PINGPONG = os.path.join(BENCHBIN, "pingpong")
GETPPID = os.path.join(BENCHBIN, "getppid")
JANK_BT = os.path.join(ROOT, "bench", "jank.bt")
JANK_BCC = os.path.join(ROOT, "bench", "jank_bcc.py")
RESULTS = os.path.join(ROOT, "bench", "RESULTS.md")
PYTHON = "/usr/bin/python3"  # Debian's, the one python3-bpfcc is installed for

sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
os.environ.setdefault("JANKBPF_BUILD", BUILD)
from target import Target  # noqa: E402  (jank_target's own helper)

QUICK = os.environ.get("BENCH_QUICK", "") not in ("", "0")
ROUNDS = 2 if QUICK else 5             # throughput rounds (A B C each)
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
# The workloads (servers, their clients, the ping-pong pair, the syscall
# loop) share one CPU, the last: each request then costs what its path costs
# on that CPU, instead of how fast an idle virtual CPU wakes up (this VM does
# not halt-poll), which moves throughput by 10x from minute to minute.
# They also run at nice -20, so that other work on a shared machine takes
# less of their CPU (it still moves throughput: see the baseline spread).
PIN_CPU = (os.cpu_count() or 1) - 1
TASKSET = ["nice", "-n", "-20", "taskset", "-c", str(PIN_CPU)]


class Fatal(Exception):
    """A needed tool is missing or failed to attach: the bench fails."""


T0 = time.monotonic()


def say(msg: str) -> None:
    print(f"[bench {time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


# ---- process bookkeeping: nothing is left behind ---------------------------

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
    return time.monotonic() - t


def cleanup() -> None:
    for p in reversed(_children):
        if p.poll() is None:
            stop(p, signal.SIGTERM, 15)


# ---- small helpers ----------------------------------------------------------

def run(argv, **kw) -> str:
    """Runs a command to completion (registered, so an interrupted bench
    stops it too); its stdout, or CalledProcessError."""
    p = spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    out, err = p.communicate()
    _children.remove(p)
    if p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, argv, out, err)
    return out


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def fmt(x, spec=".1f", none="n/a"):
    if x is None or (isinstance(x, float) and x != x):
        return none
    return format(x, spec)


def spread(xs, spec=".3f"):
    """median [min-max] of a list."""
    if not xs:
        return "n/a"
    return f"{format(median(xs), spec)} [{format(min(xs), spec)}–{format(max(xs), spec)}]"


def proc_cpu_ns(pid: int) -> int:
    """On-CPU ns of every thread of pid (schedstat: ns, not clock ticks)."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                pass
    except FileNotFoundError:
        pass
    return total


def proc_cpu_split_ns(pid: int) -> tuple[int, int]:
    """(own, children) CPU of a process: utime + stime with exited threads
    included, and cutime + cstime of its waited-for children (trace-cmd):
    /proc/PID/stat, in clock ticks (10 ms)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = 1000000000 // os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) * tick, (int(fields[13]) + int(fields[14])) * tick


def proc_cpu_total_ns(pid: int) -> int:
    return sum(proc_cpu_split_ns(pid))


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
    """prog id -> tracepoint/event name, for perf-event attachments of pid."""
    out = {}
    for a in bpftool_json("perf", "list"):
        if a.get("pid") == pid:
            out[a["prog_id"]] = a.get("tracepoint") or a.get("event") or a.get("fd_type", "?")
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


# ---- the tools being compared -----------------------------------------------

class LineReader:
    """Reads a pipe line by line in a thread, with each line's arrival time
    (CLOCK_MONOTONIC ns, the same clock as jank_target's truth)."""

    def __init__(self, stream):
        self.lines: list[tuple[int, str]] = []
        self.cond = threading.Condition()
        self.eof = False
        self.t = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self.t.start()

    def _run(self, stream):
        for line in stream:
            now = time.monotonic_ns()
            with self.cond:
                self.lines.append((now, line.rstrip("\n")))
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def wait_for(self, pattern: str, timeout: float, start: int = 0):
        """(arrival_ns, line, index) of the first line from index `start` on
        matching pattern, or None on timeout/EOF."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        i = start
        with self.cond:
            while True:
                while i < len(self.lines):
                    if rx.search(self.lines[i][1]):
                        return self.lines[i][0], self.lines[i][1], i
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    return None
                self.cond.wait(min(left, 0.1))

    def text(self) -> str:
        with self.cond:
            return "\n".join(l for _, l in self.lines)


LOG_ROOT = None  # a temporary directory, set by main()
_log_seq = 0


class Jankbpf:
    """build/jankbpf as a user runs it; stdout JSON lines, stderr status.
    Each run writes its stack and trace logs into a directory of its own
    under LOG_ROOT (removed at the end), not /var/log/jankbpf: the bench
    leaves nothing behind, and no run inherits another's report quota."""

    def __init__(self, *args: str):
        global _log_seq
        _log_seq += 1
        self.log_dir = os.path.join(LOG_ROOT, f"run{_log_seq}")
        self.argv = [JANKBPF, *args, "--log-dir", self.log_dir]
        self.t_exec = time.monotonic_ns()
        self.proc = spawn(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out = LineReader(self.proc.stdout)
        self.err = LineReader(self.proc.stderr)
        hit = self.err.wait_for(r"jankbpf: attached", 30)
        if not hit:
            stop(self.proc)
            raise Fatal(f"jankbpf failed to attach: {shlex.join(self.argv)}\n{self.err.text()[-2000:]}")
        self.t_attached = hit[0]
        self.stop_s = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def logs(self) -> list[str]:
        try:
            return sorted(os.listdir(self.log_dir))
        except FileNotFoundError:
            return []

    def records(self, type_=None) -> list[tuple[int, dict]]:
        out = []
        with self.out.cond:
            lines = list(self.out.lines)
        for t, line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if type_ is None or rec.get("type") == type_:
                out.append((t, rec))
        return out

    def stop(self) -> dict:
        """SIGTERM; returns the summary record."""
        self.stop_s = stop(self.proc, signal.SIGTERM)
        self.out.t.join(5)
        self.err.t.join(5)
        s = self.records("summary")
        if not s:
            raise Fatal(f"jankbpf wrote no summary (exit {self.proc.returncode}):\n{self.err.text()[-2000:]}")
        return s[-1][1]


class Bpftrace:
    """bpftrace running a script; attached once every probe is in bpftool's
    perf list (or, for startup timing, once a sentinel probe fired)."""

    def __init__(self, script: str, *params: str, expect_tracepoints: int | None = None):
        self.argv = ["bpftrace", "-B", "line", script, *params]
        self.t_exec = time.monotonic_ns()
        self.proc = spawn(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out = LineReader(self.proc.stdout)
        self.err = LineReader(self.proc.stderr)
        hit = self.out.wait_for(r"^Attaching \d+ probe", 60)
        if not hit:
            stop(self.proc, signal.SIGINT)
            raise Fatal(f"bpftrace failed to start: {shlex.join(self.argv)}\n{self.err.text()[-2000:]}")
        self.t_attaching = hit[0]
        self.stop_s = None
        if expect_tracepoints:
            deadline = time.monotonic() + 60
            while len(perf_attachments(self.pid)) < expect_tracepoints:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    stop(self.proc, signal.SIGINT)
                    raise Fatal(f"bpftrace failed to attach {expect_tracepoints} tracepoints:\n"
                                f"{self.err.text()[-2000:]}")
                time.sleep(0.05)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> float:
        self.stop_s = stop(self.proc, signal.SIGINT, 60)
        return self.stop_s


# ---- the workloads --------------------------------------------------------------

class Redis:
    def __init__(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.argv = [*TASKSET, "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                     "--save", "", "--appendonly", "no", "--protected-mode", "yes"]
        self.proc = spawn(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(self.port), "ping"],
                               capture_output=True, text=True)
            if r.stdout.strip() == "PONG":
                break
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise Fatal("redis-server did not come up")
            time.sleep(0.1)
        self.pid = self.proc.pid  # taskset execs redis-server in place

    def bench_argv(self, test: str, pipeline: int, n: int) -> list[str]:
        return [*TASKSET, "redis-benchmark", "-h", "127.0.0.1", "-p", str(self.port), "-t", test,
                "-n", str(n), "-c", "50", "-P", str(pipeline), "--csv"]

    def run(self, test: str, pipeline: int, n: int) -> dict:
        cpu0 = proc_cpu_ns(self.pid)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = run(self.bench_argv(test, pipeline, n))
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu1 = proc_cpu_ns(self.pid)
        client_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        rps = None
        for line in out.splitlines():
            cols = [c.strip('"') for c in line.split(",")]
            if cols and cols[0].upper() == test.upper():
                rps = float(cols[1])
        if rps is None:
            raise Fatal(f"redis-benchmark printed no {test} line:\n{out}")
        return {"rate": rps, "cpu_us": (cpu1 - cpu0) / n / 1e3, "client_us": client_s / n * 1e6, "n": n}

    def stop(self):
        stop(self.proc)


class PingPong:
    def __init__(self):
        self.proc = spawn(["nice", "-n", "-20", PINGPONG, str(PIN_CPU)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().split()
        if not line or line[0] != "ready":
            raise Fatal("pingpong did not start")
        self.pids = [int(line[1]), int(line[2])]

    def run(self, seconds: float) -> dict:
        cpu0 = sum(proc_cpu_ns(p) for p in self.pids)
        self.proc.stdin.write(f"run {int(seconds * 1000)}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().split()
        cpu1 = sum(proc_cpu_ns(p) for p in self.pids)
        if not line or line[0] != "done":
            raise Fatal(f"pingpong: unexpected {line}")
        trips, ns = int(line[1]), int(line[2])
        return {"rate": trips / (ns / 1e9), "cpu_us": (cpu1 - cpu0) / trips / 1e3, "n": trips}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def getppid_ns() -> float:
    """The least disturbed of GETPPID_REPS loops: ns per getppid()."""
    out = run([*TASKSET, GETPPID, str(GETPPID_N), str(GETPPID_REPS)])
    return min(float(l.split()[1]) for l in out.splitlines() if l.startswith("ns_per_call"))


# ---- 3. startup ---------------------------------------------------------------

def bench_startup(bcc_env: dict) -> dict:
    say("3. startup: exec -> attached")
    res = {"jankbpf": [], "jankbpf_stop": [], "bpftrace": [], "bpftrace_attaching": [],
           "bpftrace_stop": [], "bcc": [], "bcc_stop": []}
    tmp = tempfile.mkdtemp(prefix="startup-", dir=LOG_ROOT)
    sentinel = os.path.join(tmp, "jank_sentinel.bt")
    with open(JANK_BT) as f:
        text = f.read()
    # Declared last, so attached last: bpftrace attaches probes one by one in
    # the order of the script, and prints "Attaching N probes..." before the
    # first. The trigger calls getppid() every ~100 us.
    text += ("\ntracepoint:syscalls:sys_enter_getppid /pid == $2 && @seen == 0/\n"
             "{\n\t@seen = 1;\n\tprintf(\"sentinel: attached\\n\");\n}\n")
    with open(sentinel, "w") as f:
        f.write(text)
    trigger = spawn([GETPPID, "--trigger"])
    try:
        for _ in range(STARTUP_REPS):
            jb = Jankbpf()
            res["jankbpf"].append((jb.t_attached - jb.t_exec) / 1e6)
            jb.stop()
            res["jankbpf_stop"].append(jb.stop_s * 1e3)

            bt = Bpftrace(sentinel, str(THRESHOLD_MS), str(trigger.pid))
            res["bpftrace_attaching"].append((bt.t_attaching - bt.t_exec) / 1e6)
            hit = bt.out.wait_for(r"^sentinel: attached", 60)
            if not hit:
                bt.stop()
                raise Fatal("bpftrace's sentinel probe never fired:\n" + bt.err.text()[-2000:])
            res["bpftrace"].append((hit[0] - bt.t_exec) / 1e6)
            res["bpftrace_stop"].append(bt.stop() * 1e3)

            t_exec = time.monotonic_ns()
            p = spawn([PYTHON, JANK_BCC, str(THRESHOLD_MS)], stdout=subprocess.DEVNULL,
                      stderr=subprocess.PIPE, text=True, env=bcc_env)
            err = LineReader(p.stderr)
            hit = err.wait_for(r"^jank_bcc: attached", 120)
            if not hit:
                stop(p, signal.SIGINT)
                raise Fatal("the BCC tool failed to attach:\n" + err.text()[-3000:])
            res["bcc"].append((hit[0] - t_exec) / 1e6)
            res["bcc_stop"].append(stop(p, signal.SIGINT, 60) * 1e3)
    finally:
        stop(trigger, signal.SIGKILL)
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    return res


# ---- 5. accuracy and latency ---------------------------------------------------

def bench_accuracy() -> dict:
    say("5. accuracy and latency on jank_target")
    rep = 1 if QUICK else 3
    script = (f"spin:200x{rep},sleep:300x{rep},io:250x{rep},runnable:300x{rep},short:2000,"
              f"spin:100x{rep},sleep:140x{rep},spin:160,stuck,sleep:200")
    t = Target.start(script, start_delay=3.5, gap_ms=100)
    res = {"script": script, "target_argv": t.argv}
    try:
        jb = Jankbpf("--pid", str(t.pid), "--ignore-startup-time", "3")
        stuck = t.wait_stuck(timeout=60)
        hang = jb.out.wait_for(r'"type":"hang"', (HANG_MS + 10000) / 1e3)
        t.release()
        t.wait_done(60)
        rc = t.wait(30)
        deadline = time.monotonic() + 15
        while jb.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # jankbpf exits by itself when its --pid target is gone
        summary = jb.stop()
        res["target_exit"] = rc
    finally:
        t.kill()
    thr_ns = THRESHOLD_MS * 1e6
    truth = [x for x in t.main_tasks()]
    janks = [(a, r) for a, r in jb.records("jank") if r["tid"] == t.pid]
    errors, matched, spurious, arrival_ms, rows = [], set(), [], [], []
    for arr, r in janks:
        b = r["begin_monotonic_ns"]
        cand = [x for x in truth if x.get("kind") != "short" and abs(x["begin_ns"] - b) < 5e6]
        if not cand:
            spurious.append(r)
            continue
        x = min(cand, key=lambda x: abs(x["begin_ns"] - b))
        if x["dur_ns"] < thr_ns:
            spurious.append(r)
            continue
        matched.add(x["task"])
        err = r["duration_ms"] - x["dur_ns"] / 1e6
        errors.append(err)
        arrival_ms.append((arr - x["end_ns"]) / 1e6)
        rows.append({"kind": x["kind"], "arg": x["arg"], "true_ms": x["dur_ns"] / 1e6,
                     "reported_ms": r["duration_ms"], "err_ms": err,
                     "dominant": max(r["state_ms"], key=r["state_ms"].get),
                     "arrival_ms": (arr - x["end_ns"]) / 1e6,
                     "logs": ",".join(sorted({os.path.basename(l).split("-")[0] for l in r.get("external_log", [])}))})
    long_truth = [x for x in truth if x.get("max_dur_ns", x["dur_ns"]) >= thr_ns]
    missed = [x for x in long_truth if x["task"] not in matched]
    res.update(rows=rows, errors=errors, missed=missed, spurious=spurious, n_truth_long=len(long_truth),
               n_truth_short=sum(x.get("count", 1) for x in truth if x.get("max_dur_ns", x["dur_ns"]) < thr_ns),
               arrival_ms=arrival_ms, summary=summary,
               heaviest=[r.get("heaviest_stack", "") for _, r in janks],
               external_logs=[r.get("external_log", []) for _, r in janks])
    if hang:
        arr, line, _ = hang
        h = json.loads(line)
        due_mono = stuck["begin_ns"] + HANG_MS * 1e6
        res["hang"] = {
            "kernel_late_ms": h["duration_ms"] - HANG_MS,
            "record_late_ms": h["time"] - t.epoch_ms(due_mono),
            "arrival_late_ms": (arr - due_mono) / 1e6,
            "begin_err_ms": (h["begin_monotonic_ns"] - stuck["begin_ns"]) / 1e6,
        }
    else:
        res["hang"] = None
    return res


# ---- 1 + 6. throughput rounds -------------------------------------------------

# "jankbpf-nostacks" is jankbpf --log-type 2 (traces only, no stack
# sampling or off-CPU captures): it shows what the stack machinery costs.
CONFIGS = ["none", "jankbpf", "jankbpf-nostacks", "bpftrace"]
LABEL = {"none": "nothing", "jankbpf": "jankbpf", "jankbpf-nostacks": "jankbpf --log-type 2",
         "bpftrace": "bpftrace jank.bt"}


def attach(cfg: str):
    if cfg == "jankbpf":
        return Jankbpf()
    if cfg == "jankbpf-nostacks":
        return Jankbpf("--log-type", "2")
    if cfg == "bpftrace":
        return Bpftrace(JANK_BT, str(THRESHOLD_MS), expect_tracepoints=14)
    return None


def detach(cfg: str, tool, summaries: list):
    if cfg == "jankbpf":
        summaries.append(tool.stop())
    elif cfg == "jankbpf-nostacks":
        tool.stop()
    elif cfg == "bpftrace":
        tool.stop()


def calibrate(redis: Redis, workloads) -> None:
    """Picks each redis workload's request count for about RUN_S seconds."""
    for w in workloads:
        if w["kind"] != "redis":
            continue
        probe_n = 20000 if w["pipeline"] == 1 else 200000
        if QUICK:
            probe_n //= 4
        r = redis.run(w["test"], w["pipeline"], probe_n)
        w["n"] = max(5000, int(r["rate"] * RUN_S) // 1000 * 1000)


def run_workload(w, redis: Redis, pp: PingPong) -> dict:
    if w["kind"] == "redis":
        return redis.run(w["test"], w["pipeline"], w["n"])
    return pp.run(RUN_S)


def bench_throughput(redis: Redis, pp: PingPong, workloads) -> dict:
    say(f"1. throughput, {ROUNDS} rounds of {' '.join(CONFIGS)}")
    data = {cfg: {w["name"]: [] for w in workloads} for cfg in CONFIGS}
    summaries = []
    for r in range(ROUNDS):
        for cfg in CONFIGS:
            tool = attach(cfg)
            try:
                own = bpf_prog_ids(tool.pid) if tool else set()
                foreign = foreign_tracers(own)
                runs = [run_workload(w, redis, pp) for w in workloads]
                foreign = max(foreign, foreign_tracers(own))
                for w, res in zip(workloads, runs):
                    res["foreign"] = foreign
                    data[cfg][w["name"]].append(res)
            finally:
                if tool is not None:
                    detach(cfg, tool, summaries)
        say(f"  round {r + 1}/{ROUNDS} done")
    return {"data": data, "jankbpf_summaries": summaries}


# ---- 6. syscall tax -----------------------------------------------------------

def bench_syscall_tax() -> dict:
    """ns per getppid() in a process that never waits, so is never watched.
    Host noise moves this figure by 10-50% over seconds, so each round is a
    tight A B A C A D A sequence and a tool's tax is its figure minus the
    mean of the baselines just before and after it."""
    say(f"6. syscall tax, {ROUNDS} rounds")
    tools = [c for c in CONFIGS if c != "none"]
    res = {"none": [], **{c: [] for c in tools}, "tax": {c: [] for c in tools}}
    for _ in range(ROUNDS):
        before = getppid_ns()
        res["none"].append(before)
        for cfg in tools:
            tool = attach(cfg)
            try:
                time.sleep(0.2)
                v = getppid_ns()
            finally:
                detach(cfg, tool, [])
            after = getppid_ns()
            res[cfg].append(v)
            res["none"].append(after)
            res["tax"][cfg].append(v - (before + after) / 2)
            before = after
    return res


# ---- 2. per-hook cost -----------------------------------------------------------

def bench_hooks(redis: Redis, pp: PingPong, workloads) -> dict:
    say("2. per-hook cost (kernel.bpf_stats_enabled=1)")
    old = read_sysctl("kernel.bpf_stats_enabled")
    out = {}
    write_sysctl("kernel.bpf_stats_enabled", "1")
    try:
        for cfg in ("jankbpf", "jankbpf-nostacks", "bpftrace"):
            tool = attach(cfg)
            try:
                names = prog_names(bpf_prog_ids(tool.pid))
                names.update({i: tp for i, tp in perf_attachments(tool.pid).items()})
                per_wl = {}
                total = {}
                for w in workloads:
                    s0 = prog_stats(tool.pid)
                    r = run_workload(w, redis, pp)
                    s1 = prog_stats(tool.pid)
                    d = {i: (s1[i]["run_cnt"] - s0[i]["run_cnt"], s1[i]["run_time_ns"] - s0[i]["run_time_ns"])
                         for i in s1 if i in s0}
                    cnt = sum(c for c, _ in d.values())
                    ns = sum(t for _, t in d.values())
                    per_wl[w["name"]] = {"requests": r["n"], "calls": cnt, "ns": ns,
                                         "calls_per_req": cnt / r["n"], "ns_per_req": ns / r["n"],
                                         "cpu_us": r["cpu_us"], "client_us": r.get("client_us", 0.0)}
                    for i, (c, t) in d.items():
                        a = total.setdefault(names.get(i, str(i)), [0, 0])
                        a[0] += c
                        a[1] += t
            finally:
                summary = {}
                if cfg.startswith("jankbpf"):
                    summary = tool.stop()
                else:
                    tool.stop()
            out[cfg] = {"per_workload": per_wl, "per_prog": total, "summary_bpf": summary.get("bpf")}
    finally:
        write_sysctl("kernel.bpf_stats_enabled", old)
    return out


# ---- 4. footprint -----------------------------------------------------------------

def _window(a, b, na, nb, secs):
    return {"secs": secs, "cpu_s": (b["cpu_ns"] - a["cpu_ns"]) / 1e9,
            "child_s": (b["child_ns"] - a["child_ns"]) / 1e9, "vol": b["vol"] - a["vol"],
            "nonvol": b["nonvol"] - a["nonvol"], "records": nb - na, "hwm_kb": b["hwm_kb"],
            "rss_kb": b["rss_kb"]}


def bench_footprint() -> dict:
    say(f"4. footprint: idle {IDLE_S} s, then a jank every 200 ms for {JANKY_S} s; "
        f"then {NOSTACK_S} s of janks without stacks")
    # Both targets start first and idle until their turn: old enough for the
    # ignore-startup rule (10 s) when their tasks begin. T2 also serves as
    # "one idle process" for a second jankbpf, --pid T2, during the idle window.
    t1 = Target.start(f"sleep:170x{JANKY_S * 5}", start_delay=IDLE_S + 3, gap_ms=30)
    t2 = Target.start(f"sleep:170x{NOSTACK_S * 5}", start_delay=IDLE_S + JANKY_S + 8, gap_ms=30)
    res = {"target_argv": t1.argv}
    try:
        jb = Jankbpf()
        watch = Jankbpf("--pid", str(t2.pid))
        time.sleep(1.0)
        c0, w0 = proc_counters(jb.pid), proc_counters(watch.pid)
        n0, m0 = len(jb.records()), len(watch.records())
        time.sleep(IDLE_S)
        c1, w1 = proc_counters(jb.pid), proc_counters(watch.pid)
        n1, m1 = len(jb.records()), len(watch.records())
        watch.stop()
        t1.wait_tasks(1, timeout=30)
        c2 = proc_counters(jb.pid)
        n2 = len(jb.records())
        time.sleep(JANKY_S)
        c3 = proc_counters(jb.pid)
        n3 = len(jb.records())
        mine = [r for _, r in jb.records("jank") if r["pid"] == t1.pid]
        res["logs"] = len(jb.logs())
        summary = jb.stop()

        # Without stacks (--log-type 2: traces only), the RSS goal's case.
        ns = Jankbpf("--log-type", "2")
        time.sleep(0.5)
        t2.wait_tasks(1, timeout=60)
        d0 = proc_counters(ns.pid)
        k0 = len(ns.records())
        time.sleep(NOSTACK_S)
        d1 = proc_counters(ns.pid)
        k1 = len(ns.records())
        ns_summary = ns.stop()
    finally:
        t1.kill()
        t2.kill()
    res["idle"] = _window(c0, c1, n0, n1, IDLE_S)
    res["watch_idle"] = _window(w0, w1, m0, m1, IDLE_S)
    res["janky"] = _window(c2, c3, n2, n3, JANKY_S)
    res["janky"]["target_janks"] = len(mine)
    res["nostack"] = _window(d0, d1, k0, k1, NOSTACK_S)
    res["threads"] = c3["threads"]
    res["summary"] = summary
    res["nostack_summary"] = ns_summary
    return res


# ---- 7. stacks -----------------------------------------------------------------------

def stack_log_main_share(path: str) -> tuple[int, int, int]:
    """(samples, samples whose stack reaches main, file bytes) of a jankbpf
    stack log: a tree of frames, each line '<count> #NN pc ... (symbol+off)',
    nested by indentation; a sample reaches main when a frame on its path is
    main. Counted at the outermost main of each path."""
    total = reach = 0
    stack: list[tuple[int, bool]] = []  # (indent, main on the path so far)
    with open(path, errors="replace") as f:
        text = f.read()
    m = re.search(r"(\d+) samples", text.splitlines()[0] if text else "")
    total = int(m.group(1)) if m else 0
    for line in text.splitlines()[1:]:
        mm = re.match(r"^(\s*)(\d+) #\d+ (.*)$", line)
        if not mm:
            continue
        indent, count, frame = len(mm.group(1)), int(mm.group(2)), mm.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        above = bool(stack) and stack[-1][1]
        is_main = bool(re.search(r"\(main\+\d+\)", frame))
        if is_main and not above:
            reach += count
        stack.append((indent, above or is_main))
    return total, reach, len(text)


def bench_stacks() -> dict:
    say("7. stacks")
    res = {}
    helptext = run([JANKBPF, "--help"])
    res["options"] = sorted(set(re.findall(r"--(?:log-type|sample-[a-z]+|stack-[a-z]+)", helptext)))
    if os.path.exists(UNIT):
        r = subprocess.run([UNIT, "[stack-bench]"], capture_output=True, text=True, timeout=300)
        m = re.search(r"\[stack-bench\] (\d+) samples x5, (\d+) frames: cold first ([\d.]+) ms; "
                      r"warm p50 ([\d.]+) us, p99 ([\d.]+) us, max ([\d.]+) us", r.stdout)
        if m:
            res["unit"] = {"samples": int(m.group(1)), "frames": int(m.group(2)),
                           "cold_ms": float(m.group(3)), "p50_us": float(m.group(4)),
                           "p99_us": float(m.group(5)), "max_us": float(m.group(6))}
        else:
            res["unit_error"] = (r.stdout + r.stderr)[-500:]
    else:
        res["unit_error"] = f"{os.path.relpath(UNIT, ROOT)} not built"
    res["python"] = bench_python_reader()

    # One 800 ms spin on jank_target (-O2, no frame pointers), sampled at the
    # same time by jankbpf (its defaults) and by bpftrace's ustack at 199 Hz;
    # then again with --log-type 1 (stacks only, no trace) to split the cost.
    res["jankbpf"], res["bpftrace_ustack"], res["bpftrace_argv"] = stack_run([], with_bpftrace=True)
    res["jankbpf_stacks_only"], _, _ = stack_run(["--log-type", "1"], with_bpftrace=False)
    res["node"] = bench_stacks_node()
    return res


def bench_python_reader() -> dict:
    """What reading one sample's Python frames costs the ring thread: the
    unit binary's [python-bench] case walks a live CPython 3.11 process
    spinning 30 Python frames deep, 5,000 times, with process_vm_readv."""
    if not os.path.exists(UNIT):
        return {"error": f"{os.path.relpath(UNIT, ROOT)} not built"}
    r = subprocess.run([UNIT, "[python-bench]"], capture_output=True, text=True, timeout=300)
    m = re.search(r"\[python-bench\] (\S+), (\d+) frames: runtime found in ([\d.]+) ms; cold first read ([\d.]+) us; "
                  r"warm p50 ([\d.]+) us, p99 ([\d.]+) us, max ([\d.]+) us; ([\d.]+) reads per capture", r.stdout)
    if not m:
        return {"error": (r.stdout + r.stderr)[-500:]}
    return {"python": m.group(1), "frames": int(m.group(2)), "find_ms": float(m.group(3)),
            "cold_us": float(m.group(4)), "p50_us": float(m.group(5)), "p99_us": float(m.group(6)),
            "max_us": float(m.group(7)), "reads": float(m.group(8))}


def frames_of(stack: str) -> str:
    """A heaviest_stack as 'leaf < caller < ... < main': function names
    only (no offsets, no C++ argument lists); a frame without a symbol shows
    its module."""
    syms = []
    for line in stack.splitlines():
        m = re.match(r"\s*#\d+ pc [0-9a-f]+ (.*)$", line)
        if not m:
            syms.append(line.strip().split(" ", 1)[-1])
            continue
        rest = m.group(1).strip()
        m = re.match(r"^(\S*?)\((.*)\)\(([0-9a-f]*)\)$", rest)
        if m and m.group(2) and not re.fullmatch(r"[0-9a-f]{16,}", m.group(2)):
            sym = re.sub(r"\+(0x)?[0-9a-f]+$", "", m.group(2))
            syms.append(sym.split("(")[0] or sym)
        else:
            syms.append(os.path.basename(rest.split("(")[0]) or "?")
    return " < ".join(syms)


def stack_run(args, with_bpftrace: bool):
    t = Target.start("spin:800,stuck", start_delay=3.5, gap_ms=100, nice=-20)
    bt_res, bt_argv = None, None
    try:
        jb = Jankbpf("--pid", str(t.pid), "--ignore-startup-time", "3", *args)
        if with_bpftrace:
            bt_script = "profile:hz:199 /pid == $1/ { @[ustack] = count(); }"
            bt_argv = ["bpftrace", "-B", "line", "-e", bt_script, str(t.pid)]
            bt = spawn(bt_argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out = LineReader(bt.stdout)
            if not out.wait_for(r"^Attaching", 60):
                stop(bt, signal.SIGINT)
                raise Fatal("bpftrace (profile) failed to attach")
        own0, ch0 = proc_cpu_split_ns(jb.pid)
        t.wait_stuck(timeout=30)
        task = t.main_tasks()[-1]
        hit = jb.out.wait_for(r'"type":"jank"', 30)
        own1, ch1 = proc_cpu_split_ns(jb.pid)
        if with_bpftrace:
            stop(bt, signal.SIGINT, 60)  # prints the map while the target is alive
            out.t.join(10)
        t.release()
        t.wait_done(30)
        t.wait(30)
        deadline = time.monotonic() + 10
        while jb.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        summary = jb.stop()
    finally:
        t.kill()
    logs = [os.path.join(jb.log_dir, f) for f in jb.logs() if f.startswith("stack-")]
    tot = reach = size = 0
    for f in logs:
        a, b, c = stack_log_main_share(f)
        tot, reach, size = tot + a, reach + b, size + c
    rec = json.loads(hit[1]) if hit else {}
    res = {"args": args, "samples": summary.get("samples"), "offcpu": summary.get("offcpu_captures"),
           "lost": summary.get("samples_lost"), "dropped": summary.get("samples_dropped"),
           "logs": len(logs), "log_samples": tot, "to_main": reach, "log_bytes": size,
           "heaviest": frames_of(rec.get("heaviest_stack", "")), "cpu_ms": (own1 - own0) / 1e6,
           "child_ms": (ch1 - ch0) / 1e6, "traces": summary.get("traces"),
           "arrival_ms": (hit[0] - task["end_ns"]) / 1e6 if hit else None,
           "task_ms": task["dur_ns"] / 1e6}
    if with_bpftrace:
        total = to_main = 0
        for m in re.finditer(r"@\[\n(.*?)\]: (\d+)", out.text() + "\n", re.S):
            frames = [f.strip() for f in m.group(1).splitlines() if f.strip()]
            n = int(m.group(2))
            total += n
            if any(re.match(r"main\+\d+$", f) for f in frames):
                to_main += n
        bt_res = {"samples": total, "to_main": to_main}
        bt_argv = bt_argv[:-1] + ["PID"]
    return res, bt_res, bt_argv


NODE_JS = r"""
// A jank every second: 600 ms of JavaScript on the event loop, from 4 s on.
function busy(ms) { const end = Date.now() + ms; let x = 0; while (Date.now() < end) x += Math.sqrt(x + 1); return x; }
let n = 0;
setTimeout(() => { const t = setInterval(() => { busy(600); if (++n >= 2) { clearInterval(t); } }, 1000); }, 4000);
"""


def bench_stacks_node() -> dict:
    """Cold: the first stacks of a large binary (node, JIT frames and all)."""
    node = shutil_which("node")
    if not node:
        return {"error": "node not installed"}
    p = spawn([node, "-e", NODE_JS], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        jb = Jankbpf("--pid", str(p.pid), "--ignore-startup-time", "3")
        cpu0 = proc_cpu_split_ns(jb.pid)[0]
        first = jb.out.wait_for(r'"type":"jank"', 30)
        cpu1 = proc_cpu_split_ns(jb.pid)[0]
        second = jb.out.wait_for(r'"type":"jank"', 30, first[2] + 1 if first else 0)
        cpu2 = proc_cpu_split_ns(jb.pid)[0]
        p.wait(30)
        deadline = time.monotonic() + 10
        while jb.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        summary = jb.stop()
    finally:
        stop(p)
    res = {"samples": summary.get("samples"), "janks": summary.get("janks")}
    for key, hit, cpu in (("first", first, cpu1 - cpu0), ("second", second, cpu2 - cpu1)):
        if hit:
            r = json.loads(hit[1])
            end_mono = r["begin_monotonic_ns"] + r["duration_ms"] * 1e6
            res[key] = {"cpu_ms": cpu / 1e6, "arrival_ms": (hit[0] - end_mono) / 1e6,
                        "heaviest": frames_of(r.get("heaviest_stack", ""))}
    logs = [os.path.join(jb.log_dir, f) for f in jb.logs() if f.startswith("stack-")]
    tot = reach = 0
    for f in logs:
        a, b, _ = stack_log_main_share(f)
        tot, reach = tot + a, reach + b
    res.update(log_samples=tot, to_main=reach, logs=len(logs))
    return res


def shutil_which(name):
    import shutil
    return shutil.which(name)


# ---- report --------------------------------------------------------------------------

def machine() -> dict:
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
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    return {"kernel": platform.release(), "cpu": cpu, "cores": os.cpu_count(),
            "mem_gib": mem_kb / 1048576, "os": os_name, "load_start": load,
            "jankbpf": ver([JANKBPF, "--version"]), "bpftrace": ver(["bpftrace", "--version"]),
            "redis": ver(["redis-server", "--version"]),
            "bcc": ver(["dpkg-query", "-W", "-f=${Version}", "python3-bpfcc"]),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def disp(argv) -> str:
    """A command line as it would be typed from the repository root."""
    out = []
    for a in argv:
        a = str(a)
        if a.startswith(BUILD + "/"):
            a = "build/" + a[len(BUILD) + 1:]
        elif a.startswith(ROOT + "/"):
            a = a[len(ROOT) + 1:]
        out.append(a)
    return shlex.join(out)


def verdict(ok):
    return "**met**" if ok else "**not met**"


def report(M, workloads, thr, tax_res, hooks, start, foot, acc, stacks, total_s) -> tuple[str, str]:
    """(terminal table, RESULTS.md text)."""
    L = []          # markdown
    T = []          # terminal
    goals = []      # (goal, measured, verdict)
    data = thr["data"]

    def ratios(cfg, wname, key):
        out = []
        for a, b in zip(data[cfg][wname], data["none"][wname]):
            if a.get(key) is not None and b.get(key):
                out.append(a[key] / b[key])
        return out

    # ---- goals
    redis_w = [w["name"] for w in workloads if w["kind"] == "redis"]
    tp_jb = {w: median(ratios("jankbpf", w, "rate")) for w in redis_w}
    cpu_jb = {w: median(ratios("jankbpf", w, "cpu_us")) for w in redis_w}
    worst = min(tp_jb.values())
    tp_ns = {w: median(ratios("jankbpf-nostacks", w, "rate")) for w in redis_w}
    pw = hooks["jankbpf"]["per_workload"]
    share = {w: pw[w]["ns_per_req"] / ((pw[w]["cpu_us"] + pw[w]["client_us"]) * 10) for w in redis_w if w in pw}
    goals.append(("redis-benchmark throughput with jankbpf ≥ 99% of baseline",
                  "BPF share of each request's CPU (section 2, noise-free): "
                  + ", ".join(f"{w} {share[w]:.1f}%" for w in share) + "; "
                  "throughput, median ratio per workload: " + ", ".join(f"{w} {tp_jb[w]:.3f}" for w in redis_w)
                  + "; server CPU/request ratio: " + ", ".join(f"{cpu_jb[w]:.3f}" for w in redis_w)
                  + "; with --log-type 2 (no stacks): " + ", ".join(f"{tp_ns[w]:.3f}" for w in redis_w),
                  verdict(worst >= 0.99 and max(share.values()) <= 1.0)))
    pp = "ping-pong"
    goals.append(("ping-pong worst case reported beside bpftrace",
                  f"jankbpf {median(ratios('jankbpf', pp, 'rate')):.3f}, jankbpf --log-type 2 "
                  f"{median(ratios('jankbpf-nostacks', pp, 'rate')):.3f}, "
                  f"bpftrace {median(ratios('bpftrace', pp, 'rate')):.3f} of baseline", "reported"))

    def avg_ns(cfg):
        pr = hooks[cfg]["per_prog"]
        c = sum(v[0] for v in pr.values())
        return (sum(v[1] for v in pr.values()) / c if c else float("nan")), c
    avg_hook, c = avg_ns("jankbpf")
    bt_hook = avg_ns("bpftrace")[0]
    # The goal was set on a machine where the bpftrace script measured about
    # 250-300 ns; this shared VM's speed moves by tens of percent, so the
    # same figure scaled to that reference (275 ns) is given beside it.
    scaled = avg_hook * 275.0 / bt_hook if bt_hook == bt_hook and bt_hook > 0 else float("nan")
    goals.append(("≤ 150 ns per hook invocation on average",
                  f"jankbpf {avg_hook:.0f} ns over {c:,} runs; --log-type 2 {avg_ns('jankbpf-nostacks')[0]:.0f} ns; "
                  f"bpftrace script {bt_hook:.0f} ns (jankbpf {avg_hook / bt_hook:.2f}× of it: {scaled:.0f} ns "
                  f"where bpftrace measures the goal's reference 275 ns)",
                  verdict(avg_hook <= 150) if avg_hook <= 150 or not scaled <= 150
                  else "**met relative to bpftrace** (not in absolute ns on this run)"))
    tx = tax_res["tax"]
    goals.append(("tax on an unwatched process's syscalls ≤ 30 ns",
                  f"jankbpf {median(tx['jankbpf']):+.0f} ns/getppid [{min(tx['jankbpf']):+.0f}…{max(tx['jankbpf']):+.0f}] "
                  f"(bpftrace {median(tx['bpftrace']):+.0f} ns)", verdict(median(tx["jankbpf"]) <= 30)))
    goals.append(("attached in ≤ 150 ms", f"median {median(start['jankbpf']):.0f} ms "
                  f"(worst {max(start['jankbpf']):.0f} ms)", verdict(median(start["jankbpf"]) <= 150)))
    idle, widle = foot["idle"], foot["watch_idle"]
    idle_ok = widle["cpu_s"] <= 0.001 and widle["vol"] + widle["nonvol"] == 0
    goals.append(("no CPU used while idle",
                  f"watching one idle process: {widle['cpu_s'] * 1e3:.2f} ms CPU, "
                  f"{widle['vol'] + widle['nonvol']} context switches in {widle['secs']} s; watching every "
                  f"process on this (shared) machine: {idle['cpu_s'] * 1e3:.1f} ms CPU, "
                  f"{idle['vol'] + idle['nonvol']} context switches in {idle['secs']} s, "
                  f"{idle['records']} records", verdict(idle_ok)))
    rss_mb = foot["nostack_summary"].get("max_rss_kb", 0) / 1024
    rss_def = foot["summary"].get("max_rss_kb", 0) / 1024
    goals.append(("peak RSS ≤ 25 MB without stacks",
                  f"{rss_mb:.1f} MB with --log-type 2 (no stacks); {rss_def:.1f} MB with the default "
                  "(stacks on)", verdict(rss_mb <= 25)))
    errs = [abs(e) for e in acc["errors"]]
    goals.append(("duration error ≤ 1 ms", f"median {median(errs):.3f} ms, worst {max(errs) if errs else float('nan'):.3f} ms "
                  f"over {len(errs)} tasks", verdict(bool(errs) and max(errs) <= 1.0)))
    goals.append(("no missed or spurious reports", f"{len(acc['missed'])} missed of {acc['n_truth_long']}, "
                  f"{len(acc['spurious'])} spurious (and {acc['n_truth_short']} tasks under the threshold)",
                  verdict(not acc["missed"] and not acc["spurious"])))
    h = acc["hang"]
    if h:
        goals.append((f"stuck task reported within one check interval ({CHECK_INTERVAL_MS} ms)",
                      f"hang record {h['kernel_late_ms']:.3f} ms after the 3000 ms mark (kernel), "
                      f"{h['record_late_ms']:.1f} ms (record time), arrives {h['arrival_late_ms']:.1f} ms after",
                      verdict(h["arrival_late_ms"] <= CHECK_INTERVAL_MS)))
    else:
        goals.append(("stuck task reported within one check interval", "no hang record", verdict(False)))
    sj = stacks["jankbpf"]
    bu = stacks["bpftrace_ustack"]
    bu_share = bu["to_main"] / bu["samples"] if bu["samples"] else float("nan")
    if sj["log_samples"]:
        goals.append(("every sample of the frame-pointer-less target unwinds to main",
                      f"jankbpf: {sj['to_main']} of {sj['log_samples']} samples in its stack log; "
                      f"bpftrace ustack: {bu['to_main']} of {bu['samples']} ({fmt(bu_share * 100, '.0f')}%)",
                      verdict(sj["to_main"] == sj["log_samples"])))
    else:
        goals.append(("every sample of the frame-pointer-less target unwinds to main",
                      f"jankbpf wrote no stack log; bpftrace ustack: {bu['to_main']} of "
                      f"{bu['samples']} samples ({fmt(bu_share * 100, '.0f')}%)", verdict(False)))

    L.append("# jankbpf benchmark results\n")
    L.append(f"Generated by `sudo make bench` ({'BENCH_QUICK=1, a smoke run' if QUICK else 'full run'}) "
             f"on {M['date']} in {total_s / 60:.1f} min. Rerun with the same command; "
             "`BENCH_QUICK=1 sudo make bench` for a short smoke run.\n")
    L.append("## Machine\n")
    L.append(f"- kernel {M['kernel']}, {M['os']}\n- CPU: {M['cpu']}, {M['cores']} cores, {M['mem_gib']:.0f} GiB")
    L.append(f"- load average at start: {M['load_start']}, at end: {M['load_end']} "
             "(a shared VM: other work runs beside the bench, so throughput moves ±10–15% run to run)")
    L.append(f"- jankbpf {M['jankbpf'].replace('jankbpf ', '')}; {M['bpftrace']}; {M['redis'].split(' sha')[0]}; "
             f"BCC (python3-bpfcc) {M['bcc']}\n")

    L.append("## Goals\n")
    L.append("| goal (issue 5) | measured | verdict |\n| --- | --- | --- |")
    for g in goals:
        L.append(f"| {g[0]} | {g[1]} | {g[2]} |")
    L.append("")
    T.append("GOALS")
    for g in goals:
        T.append(f"  [{g[2].strip('*'):>19}] {g[0]}: {g[1]}")

    # ---- 1. throughput
    L.append("## 1. Throughput\n")
    L.append(f"{ROUNDS} rounds; each round runs every workload with nothing attached (A), with `jankbpf` "
             "watching every process (B, its defaults: stacks and traces on), with `jankbpf --log-type 2` "
             "(C, no stacks) and with `bench/jank.bt` (D), in that order (A B C D A B C D …). Ratios are to "
             "the same round's baseline: median [min–max] over rounds. CPU is the server's own on-CPU time "
             "per request (schedstat, all its threads; for ping-pong both processes per round trip), hooks "
             "included: the figure that holds still when throughput does not.\n")
    L.append("| workload | baseline rate/s | " + " | ".join(f"{LABEL[c]} rate" for c in CONFIGS[1:])
             + " | baseline CPU µs/req | " + " | ".join(f"{LABEL[c]} CPU" for c in CONFIGS[1:]) + " |")
    L.append("| --- " * (3 + 2 * (len(CONFIGS) - 1)) + "|")
    T.append("\nTHROUGHPUT  ratio to baseline, median [min-max] over rounds; then median CPU/request ratio")
    T.append(f"  {'workload':<16}{'base/s':>9}  " + "".join(f"{c:<22}" for c in CONFIGS[1:]) + "CPU: "
             + " ".join(f"{c[:8]:>8}" for c in CONFIGS[1:]))
    for w in workloads:
        n = w["name"]
        base = median([x["rate"] for x in data["none"][n]])
        bcpu = median([x["cpu_us"] for x in data["none"][n]])
        rr = {c: ratios(c, n, "rate") for c in CONFIGS[1:]}
        cc = {c: ratios(c, n, "cpu_us") for c in CONFIGS[1:]}
        L.append(f"| {n} | {base:,.0f} | " + " | ".join(spread(rr[c]) for c in CONFIGS[1:]) + f" | {bcpu:.2f} | "
                 + " | ".join(spread(cc[c]) for c in CONFIGS[1:]) + " |")
        T.append(f"  {n:<16}{base:>9,.0f}  " + "".join(f"{spread(rr[c]):<22}" for c in CONFIGS[1:]) + "     "
                 + " ".join(f"{median(cc[c]):>8.3f}" for c in CONFIGS[1:]))
    L.append("")
    L.append("Baseline spread (max/min of the baseline runs, the noise floor): " + ", ".join(
        f"{w['name']} {max(x['rate'] for x in data['none'][w['name']]) / min(x['rate'] for x in data['none'][w['name']]):.2f}"
        for w in workloads) + ".\n")
    contaminated = {cfg: sum(1 for w in workloads for x in data[cfg][w["name"]] if x.get("foreign"))
                    for cfg in CONFIGS}
    nruns = sum(len(data["none"][w["name"]]) for w in workloads)
    L.append("Runs during which someone else's BPF tracing programs were loaded (another session's "
             "jankbpf or tracer on this shared machine taxes every configuration alike, the baseline "
             "included): " + ", ".join(f"{LABEL[cfg]} {contaminated[cfg]} of {nruns}" for cfg in CONFIGS) + ".\n")
    lost = sum(s.get("lost_events", 0) for s in thr["jankbpf_summaries"])
    L.append(f"jankbpf's summaries over these rounds: {lost} lost events; tasks checked per round "
             + ", ".join(str(s.get("tasks_checked")) for s in thr["jankbpf_summaries"]) + "; off-CPU captures "
             + ", ".join(str(s.get("offcpu_captures")) for s in thr["jankbpf_summaries"]) + ".\n")

    # ---- 6. syscall tax
    L.append("## 6. Syscall tax on an unwatched process\n")
    L.append(f"ns per `getppid()` in a process that never waits (so is never watched), the least disturbed of "
             f"{GETPPID_REPS} × {GETPPID_N:,} calls. {ROUNDS} rounds of A B A C A D A (A: nothing attached); a "
             "tool's tax is its figure minus the mean of the baselines just before and after it, since this "
             "VM's speed drifts by tens of percent over seconds.\n")
    L.append("| nothing attached | " + " | ".join(LABEL[c] for c in CONFIGS[1:]) + " | "
             + " | ".join(f"{LABEL[c]} tax" for c in CONFIGS[1:]) + " |")
    L.append("| --- " * (1 + 2 * (len(CONFIGS) - 1)) + "|")
    L.append(f"| {spread(tax_res['none'], '.1f')} | " + " | ".join(spread(tax_res[c], '.1f') for c in CONFIGS[1:])
             + " | " + " | ".join(spread(tax_res['tax'][c], '+.1f') for c in CONFIGS[1:]) + " |\n")
    T.append("  getppid tax ns (median [min-max]): " + ", ".join(
        f"{c} {spread(tax_res['tax'][c], '+.1f')}" for c in CONFIGS[1:]) + f"; base {median(tax_res['none']):.1f} ns")

    # ---- 2. hooks
    L.append("## 2. Per-hook cost (bpf_stats)\n")
    L.append("`kernel.bpf_stats_enabled=1` for this pass only (restored afterwards); one run of each "
             "workload per tool; run_time_ns / run_cnt of each program the tool holds open, read from "
             "its /proc/PID/fdinfo before and after each run (names from `bpftool prog show` and "
             "`bpftool perf list`). The tools watch every process: other processes' events count too. "
             "`sched_switch` is where jankbpf's stack machinery sits: with stacks on (the default) every "
             "switch-out of a watched thread inside a task saves an off-CPU stack in case the task turns "
             "long; `--log-type 2` shows the same hook without it.\n")
    T.append("\nPER-HOOK COST (bpf_stats)")
    for cfg in ("jankbpf", "jankbpf-nostacks", "bpftrace"):
        L.append(f"**{LABEL[cfg]}** — per program (programs that ran):\n")
        L.append("| program | runs | avg ns/run |\n| --- | --- | --- |")
        tc = tt = 0
        for name, (cnt, ns) in sorted(hooks[cfg]["per_prog"].items(), key=lambda kv: -kv[1][1]):
            if cnt:
                L.append(f"| {name} | {cnt:,} | {ns / cnt:.0f} |")
                T.append(f"  {cfg[:16]:<17}{name:<24}{cnt:>10,} runs {ns / cnt:>7.0f} ns")
                tc += cnt
                tt += ns
        L.append(f"| **all** | {tc:,} | **{tt / tc if tc else float('nan'):.0f}** |\n")
        L.append("Per request: BPF programs run and BPF ns spent (all of the machine's events during the run), "
                 "against the CPU the request costs (server, and redis-benchmark's own; for ping-pong both "
                 "processes per round trip). BPF share = BPF ns / (server + client CPU): the part of each "
                 "request's CPU spent in the tool's programs, a throughput cost that does not depend on noise.\n")
        L.append("| workload | runs/request | BPF ns/request | server CPU µs/request | client CPU µs/request | BPF share |")
        L.append("| --- | --- | --- | --- | --- | --- |")
        for n, v in hooks[cfg]["per_workload"].items():
            tot_us = v["cpu_us"] + v["client_us"]
            client = f"{v['client_us']:.2f}" if n.startswith("redis") else "—"
            L.append(f"| {n} | {v['calls_per_req']:.2f} | {v['ns_per_req']:.0f} | {v['cpu_us']:.2f} | "
                     f"{client} | {v['ns_per_req'] / (tot_us * 10):.1f}% |")
            T.append(f"  {cfg[:16]:<17}{n:<24}{v['calls_per_req']:>8.2f} runs/req {v['ns_per_req']:>7.0f} BPF ns/req")
        L.append("")

    # ---- 3. startup
    L.append("## 3. Startup: exec → attached\n")
    L.append(f"Median [min–max] of {STARTUP_REPS} runs, interleaved. jankbpf: to its `jankbpf: attached` "
             "line on stderr. bpftrace: `bench/jank.bt` plus a sentinel probe declared last "
             "(bpftrace attaches in script order) on `sys_enter_getppid` of a trigger process that calls "
             "getppid() every 100 µs; \"Attaching N probes...\" is printed before the first attach. BCC: "
             "`bench/jank_bcc.py`, the same detection as a BCC tool (TRACEPOINT_PROBE on the same 14 "
             "tracepoints, compiled by clang at startup), to its `attached` line. Stop: "
             "SIGTERM/SIGINT to exit.\n")
    L.append("| tool | exec → attached (ms) | stop (ms) |\n| --- | --- | --- |")
    L.append(f"| jankbpf | {spread(start['jankbpf'], '.0f')} | {spread(start['jankbpf_stop'], '.0f')} |")
    L.append(f"| bpftrace jank.bt | {spread(start['bpftrace'], '.0f')} (\"Attaching\" at "
             f"{median(start['bpftrace_attaching']):.0f}) | {spread(start['bpftrace_stop'], '.0f')} |")
    L.append(f"| BCC jank_bcc.py | {spread(start['bcc'], '.0f')} | {spread(start['bcc_stop'], '.0f')} |\n")
    T.append("\nSTARTUP exec->attached ms (median [min-max]); stop ms")
    for k, lbl in (("jankbpf", "jankbpf"), ("bpftrace", "bpftrace"), ("bcc", "BCC")):
        T.append(f"  {lbl:<10}{spread(start[k], '.0f'):<22} stop {spread(start[k + '_stop'], '.0f')}")

    # ---- 4. footprint
    L.append("## 4. jankbpf's footprint\n")
    L.append("Counters of jankbpf from /proc: CPU is utime + stime with exited threads and waited-for children (trace-cmd) included, in 10 ms ticks; voluntary + involuntary "
             "context switches, VmHWM). *every process*: jankbpf with no target, its defaults (stacks and "
             "traces on), on this shared machine, where other sessions' shells and tests run; *one idle "
             "process*: `jankbpf --pid` of an idle jank_target, at the same time, which isolates jankbpf's "
             "own periodic wakeups from its reactions to other processes' janks. The janky window runs "
             "`jank_target --script sleep:170xN --gap 30` (a 170 ms task every 200 ms). *no stacks*: the "
             "same with `--log-type 2` (traces only).\n")
    L.append("| run, window | CPU s | children's CPU s (trace-cmd) | context switches (vol+invol) | records written | peak RSS (VmHWM) |")
    L.append("| --- | --- | --- | --- | --- | --- |")
    T.append("\nFOOTPRINT (jankbpf)")
    for k, lbl in (("watch_idle", "one idle process, idle"), ("idle", "every process, idle"),
                   ("janky", "every process, janky"), ("nostack", "every process, janky, no stacks")):
        w = foot[k]
        L.append(f"| {lbl}, {w['secs']} s | {w['cpu_s']:.2f} | {w['child_s']:.2f} | {w['vol']}+{w['nonvol']} | {w['records']} | "
                 f"{w['hwm_kb'] / 1024:.1f} MB |")
        T.append(f"  {lbl:<34}{w['secs']:>3} s  CPU {w['cpu_s']:.2f}+{w['child_s']:.2f} s  ctxsw {w['vol']}+{w['nonvol']}  "
                 f"records {w['records']}  VmHWM {w['hwm_kb'] / 1024:.1f} MB")
    j = foot["janky"]
    per_rec = (j["cpu_s"] + j["child_s"]) / j["records"] * 1e6 if j["records"] else float("nan")
    s_ = foot["summary"]
    L.append(f"\nJanky window: {j['target_janks']} jank records for the target, {per_rec:.0f} µs of jankbpf CPU "
             f"(its own and its children's) per record written; {foot['logs']} log files. Summary at exit (default run): "
             + ", ".join(f"{k} {s_.get(k)}" for k in ("cpu_user_s", "cpu_sys_s", "max_rss_kb", "lost_events",
                                                       "samples", "offcpu_captures", "stack_logs", "traces"))
             + f"; no-stacks run: max_rss_kb {foot['nostack_summary'].get('max_rss_kb')}, traces "
             f"{foot['nostack_summary'].get('traces')}. Traces are taken for tasks past the trace threshold "
             "(450 ms) of any process on the machine, so the children's CPU depends on what else runs.\n")

    # ---- 5. accuracy
    L.append("## 5. Accuracy and latency\n")
    L.append(f"`jank_target --script {acc['script']} --start-delay 3.5 --gap 100`, watched by "
             f"`jankbpf --pid PID --ignore-startup-time 3` (its defaults otherwise: stacks, and a trace for "
             "tasks past 450 ms). Truth is the app's own CLOCK_MONOTONIC begin/end "
             "of each task; a record matches the task whose begin is within 5 ms of its "
             "`begin_monotonic_ns`. Arrival: when the bench process read the line, minus the true end. "
             "logs: the external_log files of the record.\n")
    L.append("| task | true ms | reported ms | error ms | dominant state | logs | record arrives after end (ms) |")
    L.append("| --- | --- | --- | --- | --- | --- | --- |")
    for r in acc["rows"]:
        L.append(f"| {r['kind']}:{r['arg']} | {r['true_ms']:.3f} | {r['reported_ms']:.3f} | {r['err_ms']:+.3f} | "
                 f"{r['dominant']} | {r['logs'] or '—'} | {r['arrival_ms']:.1f} |")
    errs_s = acc["errors"]
    L.append(f"\nError: median {median([abs(e) for e in errs_s]):.3f} ms, worst {max(abs(e) for e in errs_s) if errs_s else float('nan'):.3f} ms; "
             f"missed {len(acc['missed'])} of {acc['n_truth_long']} (" +
             ", ".join(f"{x['kind']}:{x['arg']}" for x in acc["missed"]) + f"); spurious {len(acc['spurious'])}; "
             f"record arrival after task end: median {median(acc['arrival_ms']):.1f} ms, worst "
             f"{max(acc['arrival_ms']) if acc['arrival_ms'] else float('nan'):.1f} ms.")
    if h:
        L.append(f"Stuck task: the `hang` record's duration_ms is {h['kernel_late_ms']:+.3f} ms past 3000 ms "
                 f"(the kernel's own lateness), its `time` {h['record_late_ms']:+.1f} ms and its arrival in the "
                 f"bench process {h['arrival_late_ms']:+.1f} ms after task begin + 3000 ms; its begin is "
                 f"{h['begin_err_ms']:+.3f} ms from the app's.\n")
    else:
        L.append("Stuck task: **no hang record arrived**.\n")
    T.append("\nACCURACY")
    T.append(f"  error |ms|: median {median([abs(e) for e in errs_s]):.3f}, worst "
             f"{max(abs(e) for e in errs_s) if errs_s else float('nan'):.3f}; missed {len(acc['missed'])}/"
             f"{acc['n_truth_long']}, spurious {len(acc['spurious'])}; arrival after end median "
             f"{median(acc['arrival_ms']):.1f} ms")
    if h:
        T.append(f"  hang: kernel {h['kernel_late_ms']:+.3f} ms, record time {h['record_late_ms']:+.1f} ms, "
                 f"arrival {h['arrival_late_ms']:+.1f} ms after begin+3000 ms")

    # ---- 7. stacks
    L.append("## 7. Stacks\n")
    L.append(f"jankbpf's stack options: {', '.join('`' + o + '`' for o in stacks['options'])}; "
             "everything below runs with their defaults.\n")
    if "unit" in stacks:
        u = stacks["unit"]
        L.append(f"- The stack library alone (`build/jankbpf-unit \"[stack-bench]\"`: unwind + symbolize of 16 KB "
                 f"perf samples of `stack_target deep`, -O2 -fomit-frame-pointer, {u['frames']} frames): cold "
                 f"first sample {u['cold_ms']:.1f} ms; warm p50 {u['p50_us']:.1f} µs, p99 {u['p99_us']:.1f} µs, "
                 f"max {u['max_us']:.0f} µs — about {1e6 / u['p50_us']:,.0f} samples/s on one core.")
        T.append(f"\nSTACKS  library: cold {u['cold_ms']:.1f} ms, warm p50 {u['p50_us']:.1f} us, "
                 f"p99 {u['p99_us']:.1f} us")
    else:
        L.append(f"- Stack library bench: not run ({stacks.get('unit_error', '?')}).")
    py = stacks.get("python", {})
    if "p50_us" in py:
        L.append(f"- Python frames (`build/jankbpf-unit \"[python-bench]\"`: the ring thread's read of one sample's "
                 f"frames, {py['python']} spinning {py['frames']} Python frames deep, process_vm_readv): runtime found "
                 f"in {py['find_ms']:.1f} ms (once per process); cold first read {py['cold_us']:.0f} µs; warm p50 "
                 f"{py['p50_us']:.1f} µs, p99 {py['p99_us']:.0f} µs, max {py['max_us']:.0f} µs; {py['reads']:.0f} "
                 f"reads per capture ({py['p50_us'] / py['frames']:.1f} µs per frame).")
        T.append(f"PYTHON  frames: {py['frames']} per capture, warm p50 {py['p50_us']:.1f} us, p99 {py['p99_us']:.0f} us")
    else:
        L.append(f"- Python frame reader bench: not run ({py.get('error', '?')}).")
    for key, what in (("jankbpf", "defaults: stacks and traces"), ("jankbpf_stacks_only", "`--log-type 1`: stacks only")):
        x = stacks[key]
        per = (x["cpu_ms"] / x["log_samples"]) if x["log_samples"] else float("nan")
        cmd = " ".join(["jankbpf --pid PID --ignore-startup-time 3", *x["args"]])
        L.append(f"- jankbpf end to end ({what}), `{cmd}` on one {x['task_ms']:.0f} ms spin task of jank_target (-O2, no frame "
                 f"pointers, nice -20): {x['samples']} on-CPU samples, {x['offcpu']} off-CPU captures, {x['lost']} lost, "
                 f"{x['dropped']} dropped, {x['traces']} traces; {x['logs']} stack log(s) of {x['log_bytes']:,} bytes "
                 f"holding {x['log_samples']} samples, **{x['to_main']} of them reach main**. jankbpf's CPU from "
                 f"task start to record: {x['cpu_ms']:.0f} ms of its own (≈ {per:.1f} ms per sample) + "
                 f"{x['child_ms']:.0f} ms of its children (trace-cmd); the jank record arrived "
                 f"{fmt(x['arrival_ms'])} ms after the task ended. heaviest_stack: `{x['heaviest'][:400]}`")
        T.append(f"  {key:<20} {x['to_main']}/{x['log_samples']} samples to main, CPU {x['cpu_ms']:.0f} ms own + "
                 f"{x['child_ms']:.0f} ms children, record {fmt(x['arrival_ms'])} ms after task end")
    L.append(f"- bpftrace `ustack` (frame pointers) at 199 Hz on the same task at the same time: "
             f"{bu['to_main']} of {bu['samples']} samples reach `main` ({fmt(bu_share * 100, '.0f')}%). "
             f"Command: `{shlex.join(stacks['bpftrace_argv'])}`.")
    T.append(f"  bpftrace ustack {bu['to_main']}/{bu['samples']} samples to main")
    nd = stacks["node"]
    if "error" in nd:
        L.append(f"- node (cold, large binary): not run ({nd['error']}).\n")
    else:
        parts = []
        for k in ("first", "second"):
            if k in nd:
                parts.append(f"{k} jank: jankbpf CPU {nd[k]['cpu_ms']:.0f} ms, record "
                             f"{nd[k]['arrival_ms']:.0f} ms after the task ended, heaviest_stack "
                             f"`{nd[k]['heaviest'][:160]}`")
        L.append(f"- node (a large binary with JIT frames, cold then warm): `node -e` running 600 ms of "
                 f"JavaScript per jank, two janks; {nd['samples']} samples; " + "; ".join(parts)
                 + f"; stack logs: {nd['logs']}, {nd['to_main']} of {nd['log_samples']} samples reach main.\n")
        T.append("  node: " + "; ".join(parts))

    # ---- commands
    L.append("## Commands\n")
    L.append("Everything above is `sudo make bench` (`scripts/bench.sh` → `bench/bench.py`). The pieces, "
             "as run (PORT: a free loopback port; PID: the target):\n")
    L.append("```sh")
    L.append(f"nice -n -20 taskset -c {PIN_CPU} redis-server --port PORT --bind 127.0.0.1 --save '' --appendonly no --protected-mode yes")
    for w in workloads:
        if w["kind"] == "redis":
            L.append(shlex.join([*TASKSET, "redis-benchmark", "-h", "127.0.0.1", "-p", "PORT", "-t", w["test"],
                                 "-n", str(w["n"]), "-c", "50", "-P", str(w["pipeline"]), "--csv"]))
    L.append(f"nice -n -20 build/bench/pingpong {PIN_CPU}   # pins itself to CPU {PIN_CPU}; stdin: 'run {int(RUN_S * 1000)}' per measurement")
    L.append(f"nice -n -20 taskset -c {PIN_CPU} build/bench/getppid {GETPPID_N} {GETPPID_REPS}")
    L.append("build/jankbpf                                   # B: every process, defaults")
    L.append("build/jankbpf --log-type 2                      # C: no stacks")
    L.append(f"bpftrace -B line bench/jank.bt {THRESHOLD_MS}            # D")
    L.append(f"BCC_KERNEL_SOURCE=... /usr/bin/python3 bench/jank_bcc.py {THRESHOLD_MS}   # startup only")
    L.append("sysctl kernel.bpf_stats_enabled=1; bpftool -j prog show; bpftool -j perf list   # section 2")
    L.append(disp(acc["target_argv"]))
    L.append("build/jankbpf --pid PID --ignore-startup-time 3")
    L.append(disp(foot["target_argv"]))
    L.append("build/jankbpf --pid PID --ignore-startup-time 3 [--log-type 1]   # section 7, on:")
    L.append("build/tests/jank_target --script spin:800,stuck --gap 100 --start-delay 3.5 --nice -20")
    L.append(shlex.join(stacks["bpftrace_argv"]))
    L.append("node -e '<600 ms of JavaScript per jank, see NODE_JS in bench/bench.py>'")
    L.append('build/jankbpf-unit "[stack-bench]"')
    L.append("```\n")
    L.append("## Notes\n")
    L.append("- `bench/jank.bt` hooks only the 14 wait-syscall tracepoints; jankbpf also hooks sched_switch, "
             "sched_wakeup, sched_wakeup_new and sched_process_exit (thread-state split, watchdog, exits), "
             "so on wakeup-heavy loads it runs more programs per request by design. The per-hook table "
             "shows where its time goes.")
    L.append("- bpf_stats count only the time inside each program. What the hooks cost around it — every "
             "syscall of every task taking the traced slow path once a syscall tracepoint is enabled "
             "(section 6), the perf-event dispatch of each syscall tracepoint, the tp_btf entry of the "
             "scheduler hooks — is not in run_time_ns, so the server's CPU per request (section 1) can rise "
             "by more than the BPF share (section 2); the difference is that overhead.")
    L.append("- BCC needs kernel headers to compile; where the running kernel ships none (this VM), "
             "scripts/bench.sh merges Debian's linux-headers-amd64 (a different kernel version; the tool "
             "only touches tracepoint args) into a temporary tree and points BCC_KERNEL_SOURCE at it.")
    L.append(f"- The workloads (redis-server and redis-benchmark, both ping-pong processes, the getppid loop) "
             f"are pinned to CPU {PIN_CPU} with taskset, at nice -20: each request then costs what its path costs on that "
             "CPU. Unpinned, this VM's idle virtual CPUs (no guest halt-polling) take up to a millisecond to "
             "wake, and throughput swung 10x between identical runs. Pinned client and server on one CPU "
             "also means redis serves several clients per epoll_wait; the per-request hook counts in "
             "section 2 say how many programs ran per request.")
    L.append("- Every jankbpf run in the bench writes its stack/trace logs to a temporary `--log-dir` "
             "(removed at the end), so no run inherits another's report quota and nothing is left in "
             "/var/log/jankbpf.")
    L.append("- Redis request counts are calibrated at the start for ~"
             f"{RUN_S} s per run; jankbpf ignores a process's first 10 s, so the servers are started "
             "early and are older than that before any throughput run.")
    return "\n".join(T), "\n".join(L) + "\n"


# ---- main --------------------------------------------------------------------------------

def main() -> int:
    global LOG_ROOT
    if os.geteuid() != 0:
        print("bench: needs root (sudo make bench)", file=sys.stderr)
        return 1
    for f in (JANKBPF, PINGPONG, GETPPID, os.path.join(BUILD, "tests", "jank_target"),
              os.path.join(BUILD, "tests", "stack_target")):
        if not os.access(f, os.X_OK):
            raise Fatal(f"{f} is missing: run `make bench`, which builds it")
    bcc_env = dict(os.environ)
    M = machine()
    say(f"machine: {M['kernel']}, {M['cpu']} x{M['cores']}, load {M['load_start']}"
        f"{' (BENCH_QUICK)' if QUICK else ''}")
    LOG_ROOT = tempfile.mkdtemp(prefix="jankbpf-bench-logs-")
    redis = pp = None
    try:
        redis = Redis()
        pp = PingPong()
        servers_started = time.monotonic()
        say(f"redis-server on 127.0.0.1:{redis.port}, pingpong pair {pp.pids}, pinned to CPU {PIN_CPU}")
        workloads = [
            {"name": "redis SET", "kind": "redis", "test": "set", "pipeline": 1},
            {"name": "redis GET", "kind": "redis", "test": "get", "pipeline": 1},
            {"name": "redis SET -P 16", "kind": "redis", "test": "set", "pipeline": 16},
            {"name": "redis GET -P 16", "kind": "redis", "test": "get", "pipeline": 16},
            {"name": "ping-pong", "kind": "pingpong"},
        ]
        calibrate(redis, workloads)
        start = bench_startup(bcc_env)
        acc = bench_accuracy()
        # jankbpf does not check a process in its first 10 s: make sure the
        # servers are older than that (they are, unless everything above was fast).
        left = 11 - (time.monotonic() - servers_started)
        if left > 0:
            time.sleep(left)
        for pid in [redis.pid, *pp.pids]:
            assert proc_age_s(pid) > 10
        thr = bench_throughput(redis, pp, workloads)
        tax = bench_syscall_tax()
        hooks = bench_hooks(redis, pp, workloads)
        foot = bench_footprint()
        stacks = bench_stacks()
        say("6b. syscall tax on Debian 12's 6.1 x86_64 kernel (kernel lane)")
        try:
            import lane_tax
            lane_md = lane_tax.render(lane_tax.measure())
        except Exception as e:  # noqa: BLE001 - the lane is reported, not fatal
            lane_md = f"## 6b. Syscall tax on Debian 12's 6.1 x86_64 kernel\n\nnot measured: {e}\n"
    finally:
        if pp:
            pp.stop()
        if redis:
            redis.stop()
        subprocess.run(["rm", "-rf", LOG_ROOT])
    with open("/proc/loadavg") as f:
        M["load_end"] = " ".join(f.read().split()[:3])
    table, md = report(M, workloads, thr, tax, hooks, start, foot, acc, stacks, time.monotonic() - T0)
    md += "\n" + lane_md
    table += "\n" + lane_md
    print(table)
    out = os.environ.get("BENCH_RESULTS", RESULTS)
    with open(out, "w") as f:
        f.write(md)
    say(f"wrote {out}")
    return 0


def guarded_main(result: list) -> None:
    try:
        result.append(main())
    except Fatal as e:
        print(f"bench: FAILED: {e}", file=sys.stderr)
        result.append(1)
    except BaseException as e:  # noqa: BLE001 - reported, then the bench fails
        import traceback
        traceback.print_exc()
        result.append(1 if not isinstance(e, KeyboardInterrupt) else 130)


if __name__ == "__main__":
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, lambda *_: sys.exit(130))
    # scripts/bench.sh starts us in the background, where SIGINT arrives
    # ignored: take it back, so Ctrl-C stops the bench (and the children
    # started from here get the default action again).
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
        cleanup()
        if LOG_ROOT and os.path.isdir(LOG_ROOT):
            subprocess.run(["rm", "-rf", LOG_ROOT])
    os._exit(rc)
