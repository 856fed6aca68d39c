"""Launches tests/apps/jank_target with a script and reads its ground truth.

jank_target runs an event loop on its main thread (and optionally on worker
threads) and prints one JSON line per scripted task with the CLOCK_MONOTONIC
begin/end of the task as the kernel sees it (wait return -> next wait entry).
See `jank_target --help` for the script syntax. Typical use:

    with Target.start("spin:300,sleep:300,stuck", start_delay=4) as t:
        jb = Jankbpf("--pid", str(t.pid), ...)
        t.wait_stuck()            # the stuck task has begun
        ...                       # wait for jankbpf's hang record
        t.release()               # SIGUSR1: the stuck task ends
        assert t.wait() == 0
        for task in t.long_tasks(150):
            ...                   # task["dur_ns"], task["kind"], ...

For `jankbpf -- CMD` (jankbpf owns the child's stdout), write the truth to a
file and follow it:

    path = tmp_path / "truth.jsonl"
    argv = command("spin:300", start_delay=4, truth=path)
    jb = Jankbpf("--", *argv)
    t = Target.follow(path)       # reads the file as it grows
    t.wait_done()

Lines (all times CLOCK_MONOTONIC ns):
  {"ready":true,"pid","tid","comm","loop","wait","workers":[tid..],
   "mono_ns","real_ns","start_delay_ns","gap_ns"}
  {"task":K,"kind","arg","tid","pid","thread","worker","begin_ns","end_ns",
   "dur_ns","wait", ...}  one per task; K counts per thread; short:N gives one
   line with "count","max_dur_ns","min_dur_ns","sum_dur_ns"; io adds
   "io_ops","io_bytes"; runnable adds "cpu","method"; --measure adds
   "measured_ns":{running,runnable,sleeping,blocked_io} and "samples".
  {"stuck":true,"task":K,"tid",...,"begin_ns"}  when a stuck task begins
  {"done":true,"exit":CODE,"mono_ns"}
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("JANKBPF_BUILD", os.path.join(ROOT, "build"))
TARGET = os.path.join(BUILD, "tests", "jank_target")

# The states each kind is built to spend >= 90% of its time in (jankbpf's
# state_ms names). short and exit have none.
DOMINANT_STATE = {
    "spin": "running",
    "sleep": "sleeping",
    "naps": "sleeping",
    "io": "blocked_io",
    "runnable": "runnable",
    "stuck": "sleeping",
    "late": "running",  # the delivery delay comes before the task
}


def command(script: str = "", *, loop: str | None = None, gap_ms: int | None = None,
            start_delay: float | None = None, threads: int | None = None,
            worker_script: str | None = None, io_dir: str | None = None,
            truth: str | os.PathLike | None = None, name: str | None = None,
            nice: int | None = None, measure: bool = False,
            fifo: int | None = None, start_on_signal: bool = False,
            binary: str = TARGET) -> list[str]:
    """The jank_target argv for these settings (None: the target's default)."""
    argv = [binary]
    if script:
        argv += ["--script", script]
    for flag, value in (("--loop", loop), ("--gap", gap_ms), ("--start-delay", start_delay),
                        ("--threads", threads), ("--worker-script", worker_script),
                        ("--io-dir", io_dir), ("--truth", truth), ("--name", name),
                        ("--nice", nice), ("--fifo", fifo)):
        if value is not None:
            argv += [flag, str(value)]
    if measure:
        argv.append("--measure")
    if start_on_signal:
        argv.append("--start-on-signal")
    return argv


def estimate_seconds(script: str, gap_ms: int = 100, start_delay: float = 0.0) -> float:
    """Rough run time of a script (stuck steps count as 0), for timeouts."""
    total = start_delay
    for step in filter(None, (s.strip() for s in script.split(","))):
        rep = 1
        head, x, tail = step.rpartition("x")
        if x and head and tail.isdigit():
            step, rep = head, int(tail)
        kind, _, arg = step.partition(":")
        ms = int(arg) if kind in ("spin", "sleep", "io", "runnable", "naps") else 0
        if kind == "late":
            d, _, spin = arg.partition(":")
            ms = int(d) + 25 + int(spin or 200)
        if kind == "short":
            ms = int(arg) * 0.05
        if kind == "exit":
            break
        total += rep * (ms + gap_ms) / 1000.0
    return total + gap_ms / 1000.0


class Target:
    """A jank_target process (or its truth file) and the lines it printed.

    A background thread parses lines as they come: `ready`, `tasks` (finished
    task records, in order), `stuck` (stuck-task begin records), `done`.
    """

    def __init__(self, argv: list[str] | None = None, truth_path=None, env=None):
        self.argv = argv
        self.proc: subprocess.Popen | None = None
        self.lines: list[dict] = []
        self.tasks: list[dict] = []
        self.stuck: list[dict] = []
        self.ready: dict | None = None
        self.done: dict | None = None
        self.stderr_lines: list[str] = []
        self._cond = threading.Condition()
        self._eof = False
        self._stop = threading.Event()
        if truth_path is None:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True, env=env)
            source = self.proc.stdout
            threading.Thread(target=self._read_stderr, daemon=True).start()
        else:
            source = self._tail(truth_path)
        self._reader = threading.Thread(target=self._read, args=(source,), daemon=True)
        self._reader.start()

    # -- construction ---------------------------------------------------
    @classmethod
    def start(cls, script: str = "", *, env=None, ready_timeout: float = 10.0,
              **opts) -> "Target":
        """Launches jank_target (truth on its stdout) and waits for `ready`.
        opts are command()'s keyword arguments."""
        if opts.get("truth") is not None:
            raise ValueError("start() reads stdout; use command() + follow() for --truth")
        t = cls(command(script, **opts), env=env)
        t.wait_ready(ready_timeout)
        return t

    @classmethod
    def follow(cls, truth_path) -> "Target":
        """Follows a truth file written by a jank_target started elsewhere
        (e.g. by `jankbpf -- CMD`). pid comes from its ready line."""
        return cls(truth_path=truth_path)

    # -- reading --------------------------------------------------------
    def _tail(self, path):
        f = None
        buf = ""
        while not self._stop.is_set():
            if f is None:
                try:
                    f = open(path, "r")
                except FileNotFoundError:
                    time.sleep(0.02)
                    continue
            chunk = f.read()
            if not chunk:
                if self.done is not None:
                    break
                time.sleep(0.02)
                continue
            buf += chunk
            *full, buf = buf.split("\n")
            yield from (l + "\n" for l in full)
        if f is not None:
            f.close()

    def _read(self, source):
        try:
            for line in source:
                line = line.strip()
                if not line:
                    continue
                rec = json.loads(line)
                with self._cond:
                    self.lines.append(rec)
                    if rec.get("ready"):
                        self.ready = rec
                    elif rec.get("done"):
                        self.done = rec
                    elif rec.get("stuck"):
                        self.stuck.append(rec)
                    elif "task" in rec:
                        self.tasks.append(rec)
                    self._cond.notify_all()
        finally:
            with self._cond:
                self._eof = True
                self._cond.notify_all()

    def _read_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def wait_for(self, pred, timeout: float = 10.0):
        """Waits until pred(self) is true (checked on every new line);
        returns its value or raises TimeoutError."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = pred(self)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    raise TimeoutError(
                        f"jank_target: condition not met ({'exited' if self._eof else 'timeout'}); "
                        f"last lines {self.lines[-3:]} stderr {''.join(self.stderr_lines)[-500:]}")
                self._cond.wait(min(left, 0.1))

    def wait_ready(self, timeout: float = 10.0) -> dict:
        return self.wait_for(lambda t: t.ready, timeout)

    def wait_stuck(self, n: int = 1, timeout: float = 30.0) -> dict:
        """Waits until n stuck tasks have begun; returns the n-th begin record."""
        return self.wait_for(lambda t: len(t.stuck) >= n and t.stuck[n - 1], timeout)

    def wait_tasks(self, n: int, timeout: float = 30.0) -> list[dict]:
        """Waits until n task lines (all threads) have been printed."""
        return self.wait_for(lambda t: len(t.tasks) >= n and list(t.tasks), timeout)

    def wait_done(self, timeout: float = 60.0) -> dict:
        return self.wait_for(lambda t: t.done, timeout)

    # -- process control ------------------------------------------------
    @property
    def pid(self) -> int:
        if self.proc is not None:
            return self.proc.pid
        return self.wait_ready()["pid"]

    @property
    def workers(self) -> list[int]:
        return self.wait_ready()["workers"]

    def start_now(self):
        """--start-on-signal: SIGUSR2 ends the start delay; the loop's timerfd
        fires, so its wait returns for an fd and the script begins."""
        os.kill(self.pid, signal.SIGUSR2)

    def wait_asleep_in(self, *syscall_nrs: int, timeout: float = 10.0):
        """Waits until the main thread sleeps inside one of these syscalls
        (/proc/PID/syscall names it; `S` in its stat)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with open(f"/proc/{self.pid}/syscall") as f:
                    nr = f.read().split()[0]
                with open(f"/proc/{self.pid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                if nr in {str(n) for n in syscall_nrs} and state == "S":
                    return
            except (OSError, IndexError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"jank_target {self.pid} not asleep in syscall {syscall_nrs}")
            time.sleep(0.02)

    def release(self):
        """Ends the stuck task(s): SIGUSR1 releases every task stuck now, or,
        if none is, the next one to get stuck."""
        os.kill(self.pid, signal.SIGUSR1)

    def wait(self, timeout: float = 60.0) -> int | None:
        """Waits for the process (or, when following a file, the done line)
        and the reader; returns the exit status (None when following)."""
        if self.proc is None:
            self.wait_done(timeout)
            self._reader.join(5)
            return self.done.get("exit")
        rc = self.proc.wait(timeout)
        self._reader.join(5)
        return rc

    def kill(self):
        """SIGKILLs the process if it still runs; stops following a file."""
        self._stop.set()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()

    # -- ground truth ----------------------------------------------------
    def main_tasks(self) -> list[dict]:
        """Finished tasks of the main thread."""
        with self._cond:
            return [t for t in self.tasks if t["worker"] == 0]

    def long_tasks(self, threshold_ms: float, worker: int | None = 0) -> list[dict]:
        """Finished tasks lasting >= threshold_ms (worker None: all threads).
        A short:N line stands for N tasks; it is included if its longest is."""
        with self._cond:
            return [t for t in self.tasks
                    if (worker is None or t["worker"] == worker)
                    and t.get("max_dur_ns", t["dur_ns"]) >= threshold_ms * 1e6]

    def epoch_ms(self, mono_ns: int) -> float:
        """A CLOCK_MONOTONIC time as ms since the epoch (jankbpf's
        begin_time/end_time), via the ready line's paired clock readings."""
        r = self.wait_ready()
        return (r["real_ns"] + (mono_ns - r["mono_ns"])) / 1e6

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)
