"""build/jankbpf as the bench runs it: the shared runner (tests/pylib/
jankrun.py) with a log directory per run, SIGTERM to stop, and Fatal when
it does not attach or writes no summary."""
from __future__ import annotations

import os
import signal
import tempfile
import time

import jankrun

from .procs import Fatal, wait_kernel_closes

_root = None
_seq = 0


def log_root() -> str:
    """A temporary directory for every run's logs (removed by remove_logs):
    the bench leaves nothing in /var/log/jankbpf, and no run inherits
    another's report quota."""
    global _root
    if _root is None:
        _root = tempfile.mkdtemp(prefix="jankbpf-bench-logs-")
    return _root


def remove_logs() -> None:
    global _root
    if _root and os.path.isdir(_root):
        import shutil
        shutil.rmtree(_root, ignore_errors=True)
    _root = None


class Jankbpf(jankrun.Jankbpf):
    def __init__(self, *args: str):
        global _seq
        _seq += 1
        self.log_dir = os.path.join(log_root(), f"run{_seq}")
        super().__init__(*args, log_dir=self.log_dir, timeout=30,
                         attached="jankbpf: attached", failure=Fatal)

    def logs(self) -> list[str]:
        try:
            return sorted(os.listdir(self.log_dir))
        except FileNotFoundError:
            return []

    def stack_logs(self) -> list[str]:
        return [os.path.join(self.log_dir, f) for f in self.logs() if f.startswith("stack-")]

    def finish(self, exit_within: float = 0.0) -> dict:
        """SIGTERM (after up to `exit_within` s for it to exit by itself,
        as it does when its --pid target is gone); the summary record."""
        deadline = time.monotonic() + exit_within
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        self.stop_s = self.signal_stop(signal.SIGTERM, 30)
        wait_kernel_closes()  # not in stop_s: what follows is measured on a quiet kernel
        self.join(5)
        s = self.timed("summary")
        if not s:
            raise Fatal(f"jankbpf wrote no summary (exit {self.proc.returncode}):\n{self.stderr[-2000:]}")
        return s[-1][1]
