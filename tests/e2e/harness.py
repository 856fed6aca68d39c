"""Runs jankbpf and collects its records, for the end-to-end tests."""
import json
import os
import signal
import subprocess
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("JANKBPF_BUILD", os.path.join(ROOT, "build"))
JANKBPF = os.path.join(BUILD, "jankbpf")
TARGET = os.path.join(BUILD, "tests", "jank_target")


def _with_log_dir(args):
    """Tests never write to the real /var/log/jankbpf: each run gets its own
    log directory unless the test names one."""
    args = list(args)
    if "--log-dir" not in args:
        import tempfile
        d = tempfile.mkdtemp(prefix="jankbpf-e2e-")
        cut = args.index("--") if "--" in args else len(args)
        args[cut:cut] = ["--log-dir", d]
    return args


RUNNING = []  # every Jankbpf started, so a failed test leaves none running


def stop_all():
    while RUNNING:
        jb = RUNNING.pop()
        if jb.proc.poll() is None:
            jb.proc.kill()
            jb.proc.wait(10)


class Jankbpf:
    """A running jankbpf: its JSON records (parsed, in order) and stderr."""

    def __init__(self, *args, wait_attached=True, timeout=20):
        self.args = [JANKBPF, *_with_log_dir(args)]
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        RUNNING.append(self)
        self.records = []
        self.stderr_lines = []
        self.bad_lines = []
        self._attached = threading.Event()
        self._lock = threading.Lock()
        self._out = threading.Thread(target=self._read_stdout, daemon=True)
        self._err = threading.Thread(target=self._read_stderr, daemon=True)
        self._out.start()
        self._err.start()
        if wait_attached:
            deadline = time.monotonic() + timeout
            while not self._attached.wait(0.05):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self._err.join(1)
                    raise AssertionError(
                        f"jankbpf did not attach: rc={self.proc.poll()} "
                        f"stderr={''.join(self.stderr_lines)}")

    def _read_stdout(self):
        for line in self.proc.stdout:
            try:
                rec = json.loads(line)
            except ValueError:
                self.bad_lines.append(line)
                continue
            with self._lock:
                self.records.append(rec)

    def _read_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)
            if "attached" in line:
                self._attached.set()

    def of_type(self, kind, pid=None):
        with self._lock:
            return [r for r in self.records
                    if r.get("type") == kind and (pid is None or r.get("pid") == pid)]

    def wait_for(self, pred, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                for r in self.records:
                    if pred(r):
                        return r
            time.sleep(0.02)
        return None

    def stop(self, sig=signal.SIGINT, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.wait(timeout)

    def wait(self, timeout=30):
        rc = self.proc.wait(timeout)
        self._out.join(5)
        self._err.join(5)
        assert not self.bad_lines, f"non-JSON lines on stdout: {self.bad_lines[:3]}"
        return rc

    @property
    def stderr(self):
        return "".join(self.stderr_lines)

    def summary(self):
        s = self.of_type("summary")
        assert len(s) == 1, f"expected one summary record, got {len(s)}"
        return s[0]


def run_jankbpf(*args, timeout=60, env=None):
    """Runs jankbpf to completion: (returncode, records, stderr). `env`
    adds variables (e.g. JANKBPF_DISABLE) to this process's environment."""
    full_env = {**os.environ, **env} if env else None
    p = subprocess.run([JANKBPF, *_with_log_dir(args)], capture_output=True, text=True,
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


def held_bpf_ids(pid):
    """(program ids, link ids) of the BPF objects process `pid` holds open,
    from /proc/PID/fdinfo: exactly this jankbpf's, whatever else runs."""
    progs, links = set(), set()
    fdinfo = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(fdinfo):
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if key == "prog_id":
                        progs.add(int(value))
                    elif key == "link_id":
                        links.add(int(value))
        except OSError:
            pass
    return progs, links


def loaded_ids():
    """(program ids, link ids) loaded in the kernel now."""
    return ({p["id"] for p in _bpftool("prog", "list")},
            {l["id"] for l in _bpftool("link", "list")})


def still_loaded(progs, links, timeout=5.0):
    """Which of these program and link ids are still in the kernel, after
    giving it up to `timeout` s (it frees them after an RCU grace period)."""
    deadline = time.monotonic() + timeout
    while True:
        loaded_progs, loaded_links = loaded_ids()
        left = (loaded_progs & progs, loaded_links & links)
        if not any(left) or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def link_ids_of(prog_ids):
    """Ids of BPF links whose program is one of prog_ids."""
    return {l["id"] for l in _bpftool("link", "list") if l.get("prog_id") in prog_ids}


def ms(ns):
    return ns / 1e6


def close_to_app(kernel_ms, app_ms):
    """The kernel's span of a task against the app's own clock reads around it.

    The kernel's span also holds what runs between the app's clock read and
    the probe or wait that ends the task, so on a loaded runner a preemption
    there makes it longer, never shorter: allow 1 ms below (clock reads and
    timer slack), and above 2 ms or 2 %, whichever is larger."""
    return -1.0 <= kernel_ms - app_ms <= max(2.0, 0.02 * app_ms)
