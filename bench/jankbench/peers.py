"""The other programs the bench runs: bpftrace and BCC doing the same
detection as jankbpf, and the workloads (redis, the ping-pong pair, the
getppid loop), pinned to one CPU (config.TASKSET says why)."""
from __future__ import annotations

import resource
import shlex
import signal
import socket
import subprocess
import time

from jankrun import LineReader

from . import config
from .config import TASKSET
from .procs import Fatal, perf_attachments, proc_cpu_ns, run, spawn, stop


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


def bcc_startup(bcc_env: dict) -> tuple[float, float]:
    """bench/jank_bcc.py (compiled by clang at startup): (exec -> its
    `attached` line, SIGINT -> exit), in ms."""
    t_exec = time.monotonic_ns()
    p = spawn([config.PYTHON, config.JANK_BCC, str(config.THRESHOLD_MS)], stdout=subprocess.DEVNULL,
              stderr=subprocess.PIPE, text=True, env=bcc_env)
    err = LineReader(p.stderr)
    hit = err.wait_for(r"^jank_bcc: attached", 120)
    if not hit:
        stop(p, signal.SIGINT)
        raise Fatal("the BCC tool failed to attach:\n" + err.text()[-3000:])
    return (hit[0] - t_exec) / 1e6, stop(p, signal.SIGINT, 60) * 1e3


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

    def bench_argv(self, test: str, pipeline: int, n: int, port="") -> list[str]:
        return [*TASKSET, "redis-benchmark", "-h", "127.0.0.1", "-p", str(port or self.port), "-t", test,
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
        self.argv = ["nice", "-n", "-20", config.PINGPONG, str(config.PIN_CPU)]
        self.proc = spawn(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
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


def getppid_argv() -> list[str]:
    return [*TASKSET, config.GETPPID, str(config.GETPPID_N), str(config.GETPPID_REPS)]


def getppid_ns() -> float:
    """The least disturbed of GETPPID_REPS loops: ns per getppid()."""
    out = run(getppid_argv())
    return min(float(l.split()[1]) for l in out.splitlines() if l.startswith("ns_per_call"))
