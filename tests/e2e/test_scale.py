"""Scale faults (issue 10, item 2): an exec storm of 2,000 short processes a
second on a machine jankbpf watches as a whole, and 1,000 watched processes
that each jank once. Neither may exhaust jankbpf's descriptors, grow its
memory without bound, fill its maps, or cost another process its janks.
Real processes: tests/apps/exec_storm and 1,000 jank_targets."""
import json
import os
import signal
import subprocess
import threading
import time

from harness import BUILD, Jankbpf
from target import Target, command

IGNORE = "3"
STORM = os.path.join(BUILD, "tests", "exec_storm")


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Watch:
    """Reads a process's descriptor count and RSS every 0.2 s: the maximum
    is what a bound must hold, not the value at the end."""

    def __init__(self, pid):
        self.pid, self.max_fds, self.max_rss = pid, 0, 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.wait(0.2):
            try:
                self.max_fds = max(self.max_fds, fds(self.pid))
                self.max_rss = max(self.max_rss, rss_kb(self.pid))
            except OSError:
                return

    def stop(self):
        self._stop.set()
        self._t.join(2)


def test_exec_storm_costs_no_jank_and_no_resources(tmp_path):
    """Up to 30,000 processes in 15 s (2,000 a second asked; the machine's
    fork and exec bound it), each exec'd, waiting twice in poll() and
    exiting, while jankbpf watches every process and one jank_target janks
    eight times through it. Memory and descriptors are read after a first
    5 s of storm (the first stacks load kallsyms and DWARF) and must not
    grow over the next 10 s: thousands more processes cost nothing lasting."""
    jb = Jankbpf("--ignore-startup-time", IGNORE, "--threshold", "100", "--log-dir", str(tmp_path))
    storms = []
    with Target.start("spin:200x8", start_delay=4, gap_ms=1500, name="jt-in-storm") as target:
        target.wait_tasks(1, timeout=30)
        storms.append(subprocess.run([STORM, "2000", "5"], capture_output=True, text=True, timeout=60))
        fds_warm, rss_warm = fds(jb.proc.pid), rss_kb(jb.proc.pid)
        watch = Watch(jb.proc.pid)
        storms.append(subprocess.run([STORM, "2000", "10"], capture_output=True, text=True, timeout=60))
        watch.stop()
        target.wait_done(timeout=30)
    assert all(st.returncode == 0 for st in storms), [st.stderr for st in storms]
    got = [json.loads(st.stdout) for st in storms]
    spawned = sum(g["spawned"] for g in got)
    seconds = sum(g["seconds"] for g in got)
    print(f"storm: {spawned} processes in {seconds:.1f} s ({spawned / seconds:.0f}/s), "
          f"{sum(g['failed'] for g in got)} failed; jankbpf after 5 s: {fds_warm} fds, {rss_warm} kB; "
          f"over the next 10 s: max {watch.max_fds} fds, {watch.max_rss} kB")
    # The storm was one: thousands of processes. Not a rate: fork and exec
    # alone ran 1,800+ a second on one VM and 534 a second, without jankbpf,
    # on CI's of 2026-11-27 (513 with it); what is checked is that
    # thousands more processes cost nothing lasting.
    assert spawned >= 5000 and all(g["failed"] == 0 for g in got), got
    t0 = time.monotonic()
    assert jb.stop(signal.SIGTERM) == 0, jb.stderr
    assert time.monotonic() - t0 < 3, "stopping took longer than 3 s after the storm"
    janks = jb.of_type("jank", target.pid)
    assert len(janks) == 8, f"the storm cost janks: {len(janks)} of 8"
    s = jb.summary()
    assert s["lost_events"] == 0, s
    assert s["threads_untracked"] == 0 and s["procs_untracked"] == 0, s
    assert watch.max_fds <= fds_warm + 8, (fds_warm, watch.max_fds)
    assert watch.max_rss <= rss_warm + 4 * 1024, (rss_warm, watch.max_rss)


def test_a_thousand_watched_processes_each_jank_once(tmp_path):
    """1,000 jank_targets by name, each with one 150 ms off-CPU task (a
    sleep: 1,000 at once would not fit two CPUs spinning), staggered over
    5 s. Every jank and every exit arrives; descriptors and memory stay
    bounded (the unwinding sessions are capped at 64 processes)."""
    n = 1000
    jb = Jankbpf("--comm", "jt-thousand", "--ignore-startup-time", IGNORE, "--threshold", "100",
                 "--log-dir", str(tmp_path))
    fds_before, rss_before = fds(jb.proc.pid), rss_kb(jb.proc.pid)
    watch = Watch(jb.proc.pid)
    procs = []
    try:
        for i in range(n):
            procs.append(subprocess.Popen(
                command("sleep:150", start_delay=4 + i % 5, gap_ms=100, name="jt-thousand"),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 90
        for p in procs:
            p.wait(max(1, deadline - time.monotonic()))
        done = time.monotonic() + 30
        while len(jb.of_type("exit")) < n and time.monotonic() < done:
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    watch.stop()
    assert jb.stop(signal.SIGTERM) == 0, jb.stderr
    pids = {p.pid for p in procs}
    janks = [r for r in jb.of_type("jank") if r["pid"] in pids]
    exits = [r for r in jb.of_type("exit") if r["pid"] in pids]
    s = jb.summary()
    print(f"{n} processes: {len(janks)} janks, {len(exits)} exits; jankbpf fds {fds_before} -> max "
          f"{watch.max_fds}, RSS {rss_before} -> max {watch.max_rss} kB; evictions {s['evictions']}")
    assert all(p.returncode == 0 for p in procs)
    assert len(janks) == n, f"{n - len(janks)} janks missing; summary {s}"
    assert len(exits) == n, f"{n - len(exits)} exits missing"
    assert s["lost_events"] == 0 and s["procs_untracked"] == 0, s
    # Each of the 64 unwinding sessions holds a descriptor per module it
    # touched (2 or 3 here): bounded, and far below the soft limit of 1,024.
    assert watch.max_fds <= fds_before + 64 * 4, (fds_before, watch.max_fds)
    assert watch.max_rss <= rss_before + 128 * 1024, (rss_before, watch.max_rss)
