"""Runs build/jankbpf as a user does: stdout read as JSON lines, each with
its arrival time, stderr kept, the `attached` line waited for, a signal to
stop it and its summary record. Shared by tests/e2e (harness.py) and the
bench (bench/jankbench), so both measure the same program the same way.

Arrival times are CLOCK_MONOTONIC ns (time.monotonic_ns), the clock of
jank_target's ground truth and of jankbpf's begin_monotonic_ns.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("JANKBPF_BUILD", os.path.join(ROOT, "build"))
JANKBPF = os.path.join(BUILD, "jankbpf")

RUNNING: list = []  # every Jankbpf started, so a failed caller leaves none running


def stop_all(sig=signal.SIGKILL, timeout=10.0) -> None:
    """Stops every Jankbpf still running (the tests: SIGKILL after each
    test; the bench: SIGTERM, so trace-cmd children are stopped too)."""
    while RUNNING:
        jb = RUNNING.pop()
        if jb.proc.poll() is None:
            jb.signal_stop(sig, timeout)


def with_log_dir(args, log_dir: str | None = None) -> list[str]:
    """Never the real /var/log/jankbpf: each run gets its own log directory
    (a fresh temporary one unless given), unless the caller names one."""
    args = list(args)
    if "--log-dir" not in args:
        d = log_dir or tempfile.mkdtemp(prefix="jankbpf-e2e-")
        cut = args.index("--") if "--" in args else len(args)
        args[cut:cut] = ["--log-dir", d]
    return args


class LineReader:
    """Reads a pipe line by line in a thread, with each line's arrival time:
    for the other programs the bench runs (bpftrace, BCC)."""

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
        """(arrival_ns, line, index) of the first line from `start` on
        matching pattern, or None on timeout or EOF."""
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


class Jankbpf:
    """A running jankbpf: its JSON records (parsed, in order, with arrival
    times) and its stderr.

    attached: the stderr text that means attached; failure: the exception
    raised when it does not attach within `timeout` s (the process is then
    stopped)."""

    def __init__(self, *args, wait_attached=True, timeout=20, log_dir=None,
                 attached="attached", failure=AssertionError, env=None):
        self.args = [JANKBPF, *with_log_dir(args, log_dir)]
        self.t_exec = time.monotonic_ns()
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        RUNNING.append(self)
        self.records: list[dict] = []
        self.arrivals: list[int] = []  # arrival ns of records[i]
        self.bad_lines: list[str] = []
        self.stderr_lines: list[str] = []
        self.stderr_arrivals: list[int] = []  # arrival ns of stderr_lines[i]
        self.t_attached = None         # arrival ns of the attached line
        self.stop_s = None             # seconds from the stop signal to exit
        self._marker = attached
        self._attached = threading.Event()
        self._cond = threading.Condition()
        self._eof = False
        self._out = threading.Thread(target=self._read_stdout, daemon=True)
        self._err = threading.Thread(target=self._read_stderr, daemon=True)
        self._out.start()
        self._err.start()
        if wait_attached:
            self.wait_attached(timeout, failure)

    def wait_attached(self, timeout, failure=AssertionError):
        deadline = time.monotonic() + timeout
        while not self._attached.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                rc = self.proc.poll()
                if rc is None:
                    self.signal_stop(signal.SIGTERM, 30)
                self._err.join(1)
                raise failure(f"jankbpf did not attach: rc={rc} argv={' '.join(self.args)} "
                              f"stderr={self.stderr[-2000:]}")

    def _read_stdout(self):
        for line in self.proc.stdout:
            now = time.monotonic_ns()
            try:
                rec = json.loads(line)
            except ValueError:
                self.bad_lines.append(line)
                continue
            with self._cond:
                self.records.append(rec)
                self.arrivals.append(now)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _read_stderr(self):
        for line in self.proc.stderr:
            now = time.monotonic_ns()
            self.stderr_arrivals.append(now)
            self.stderr_lines.append(line)
            if self.t_attached is None and self._marker in line:
                self.t_attached = now
                self._attached.set()

    def wait_stderr(self, text: str, timeout: float = 10.0) -> int | None:
        """Arrival ns of the first stderr line containing `text`, or None."""
        deadline = time.monotonic() + timeout
        i = 0
        while True:
            while i < len(self.stderr_lines):
                if text in self.stderr_lines[i]:
                    return self.stderr_arrivals[i]
                i += 1
            if time.monotonic() > deadline or self.proc.poll() is not None:
                return None
            time.sleep(0.005)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def of_type(self, kind, pid=None):
        with self._cond:
            return [r for r in self.records
                    if r.get("type") == kind and (pid is None or r.get("pid") == pid)]

    def timed(self, kind=None) -> list[tuple[int, dict]]:
        """(arrival_ns, record) of every record (of one type)."""
        with self._cond:
            return [(t, r) for t, r in zip(self.arrivals, self.records)
                    if kind is None or r.get("type") == kind]

    def wait_record(self, pred, timeout=10.0, start=0):
        """(arrival_ns, record, index) of the first record from index
        `start` on for which pred holds; None on timeout or end of output."""
        deadline = time.monotonic() + timeout
        i = start
        with self._cond:
            while True:
                while i < len(self.records):
                    if pred(self.records[i]):
                        return self.arrivals[i], self.records[i], i
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    return None
                self._cond.wait(min(left, 0.1))

    def wait_for(self, pred, timeout=10.0):
        hit = self.wait_record(pred, timeout)
        return hit[1] if hit else None

    def signal_stop(self, sig=signal.SIGTERM, timeout=30.0) -> float:
        """Signals it (if alive) and waits, killing it after `timeout` s;
        the seconds it took to exit."""
        t = time.monotonic()
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return time.monotonic() - t

    def stop(self, sig=signal.SIGINT, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.wait(timeout)

    def wait(self, timeout=30):
        rc = self.proc.wait(timeout)
        self.join()
        self.print_digest()
        assert not self.bad_lines, f"non-JSON lines on stdout: {self.bad_lines[:3]}"
        return rc

    # What jankbpf counted as missing from its own account: printed at exit,
    # so a failing test's captured output says whether jankbpf knew.
    DIGEST = ("unseen_switches", "hook_runs_missed", "lost_events", "threads_untracked",
              "timer_failures", "features_missing")

    def print_digest(self):
        for s in self.of_type("summary"):
            digest = {k: s[k] for k in self.DIGEST if s.get(k)}
            if s.get("causes", {}).get("wakers_unknown"):
                digest["wakers_unknown"] = s["causes"]["wakers_unknown"]
            missed = {p["name"]: p["recursion_misses"] for p in s.get("bpf", []) if p.get("recursion_misses")}
            if missed:
                digest["recursion_misses"] = missed
            print(f"jankbpf summary (pid {self.proc.pid}): {digest or 'nothing missed'}")

    def join(self, timeout=5):
        self._out.join(timeout)
        self._err.join(timeout)

    @property
    def stderr(self):
        return "".join(self.stderr_lines)

    def summary(self):
        s = self.of_type("summary")
        assert len(s) == 1, f"expected one summary record, got {len(s)}"
        return s[0]
