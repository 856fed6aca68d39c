"""What one unprivileged process can make root jankbpf spend (issue 26),
each attack as the review found it: an attacker running as nobody (uid
65534, tests/apps/hostile_budget or a Python script) does it, while an
innocent jank_target (root) janks beside it. jankbpf's memory and
descriptors must stay within the budgets README's Security section
states, and the innocent's records must arrive on time and complete.

Every test here failed on the build before issue 26 (06559b7): it held
2 GiB of ELF copies, ran out of descriptors, grew by gigabytes for a perf
map, an executable note or Python code objects, opened a device, and
reported 400 sleepy processes' tasks by the thousand."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

from harness import BUILD, Jankbpf
from target import Target

HOSTILE = os.path.join(BUILD, "tests", "hostile_budget")
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
IGNORE = "3"  # --ignore-startup-time: processes younger than this are not checked
# The innocent's record comes this long after its task ended, at most, in
# the reporter's own time (README's Security section: another uid's job
# running when the task ended, what is left of its 0.5 s burst and one more
# job, ~1.5 s where files open at once; a record usually comes within
# 50 ms). Its own time, as jankbpf charges the budget: wall time less what
# the reporter (nice 10, yielding to the watched apps) waited runnable for
# a CPU. The attackers here spin at nice
# 0 on 2 cores, and CI runs these tests beside the arm64 build under qemu:
# in wall time the innocent's record came 2.60 s late there (CI on
# 9b0582d).
ON_TIME_S = 2.0
# Where the other uid's files are slow (JANKBPF_TEST_SLOW_OPEN_MS=400), the
# innocent's record waits, in the reporter's own time, for the bound
# README's Security section gives: the other uid's job running when the
# task ended, what is left of its 0.5 s burst, and the one job that burst
# let begin. A job is at most a pin: it stops opening files once past its
# 0.5 s parse time, so the file it began costs one more open. The margin
# ON_TIME_S leaves the innocent's own jobs (0.5 s) is kept.
SLOW_OPEN_S = 0.4
ONE_JOB_S = 0.5 + SLOW_OPEN_S
SLOW_ON_TIME_S = ONE_JOB_S + 0.5 + ONE_JOB_S + 0.5


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def status_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def memfd_kb(pid):
    """Memory held in memfds open in pid (the copies jankbpf once made of
    every ELF file: shared memory its RSS does not show until mapped)."""
    total = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:"):
                total += os.stat(f"/proc/{pid}/fd/{fd}").st_blocks // 2
        except OSError:
            pass
    return total


class Watch:
    """jankbpf's descriptors and the memory it holds (RSS, plus memfds not
    mapped) every 0.1 s; the maxima are what a budget must hold."""

    def __init__(self, pid):
        self.pid = pid
        self.base_fds, self.base_rss = fds(pid), self.held_kb()
        self.max_fds, self.max_rss = self.base_fds, self.base_rss
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def held_kb(self):
        return status_kb(self.pid, "VmRSS") - status_kb(self.pid, "RssShmem") + memfd_kb(self.pid)

    def _run(self):
        while not self._stop.wait(0.1):
            try:
                self.max_fds = max(self.max_fds, fds(self.pid))
                self.max_rss = max(self.max_rss, self.held_kb())
            except OSError:
                return

    def stop(self):
        self._stop.set()
        self._t.join(2)

    def __str__(self):
        return (f"jankbpf fds {self.base_fds} -> max {self.max_fds}, "
                f"memory held (RSS + memfds) {self.base_rss // 1024} -> max {self.max_rss // 1024} MiB")


def autogroup_nice(pid="self"):
    """The nice of a process's scheduler autogroup (its session's), or None
    where autogroups are off."""
    try:
        with open(f"/proc/{pid}/autogroup") as f:
            return int(f.read().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


class Attacker:
    """A process started as nobody, in a directory of its own (the attack's
    files go there); `ready` when it printed its ready line. `full_share`:
    its session gets the CPU share of the tests' own (conftest's
    keep_cpu_share raises theirs to nice -20); a flood of sleepers left at
    the default share gets ~1 % of the CPUs whenever the tests' session is
    busy (the innocent spinning, jankbpf reporting), so its 400 processes
    reached 95 tasks a second instead of 2,300, nothing was rate-limited
    and the test of the rate limit failed (CI on 999e45e with another
    session's fuzzer at nice 0 beside it)."""

    def __init__(self, *argv, shell=None, full_share=False):
        self.dir = tempfile.mkdtemp(prefix="jankbpf-attack-", dir="/var/tmp")
        os.chmod(self.dir, 0o777)
        self.exe = os.path.join(self.dir, "hostile_budget")
        shutil.copy(HOSTILE, self.exe)
        os.chmod(self.exe, 0o755)
        argv = [a.replace("{dir}", self.dir).replace("{exe}", self.exe) for a in argv]
        cmd = NOBODY + (["sh", "-c", shell.replace("{dir}", self.dir).replace("{exe}", self.exe)] if shell
                        else argv)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        nice = autogroup_nice()
        if full_share and nice is not None:
            # Its session is new (setsid before exec): its autogroup is its own.
            with open(f"/proc/{self.proc.pid}/autogroup", "w") as f:
                f.write(str(nice))
            assert autogroup_nice(self.proc.pid) == nice

    def wait_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        line = ""
        while time.monotonic() < deadline and not line.startswith("ready"):
            line = self.proc.stdout.readline()
            if not line and self.proc.poll() is not None:
                break
        assert line.startswith("ready"), f"attacker not ready: {self.proc.stderr.read()[-2000:]}"
        parts = line.split()
        return int(parts[1]) if len(parts) > 1 else self.proc.pid

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)
        shutil.rmtree(self.dir, ignore_errors=True)


class ReporterDelay:
    """The run delay (time runnable, waiting for a CPU: the second field of
    /proc/PID/task/TID/schedstat) of jankbpf's reporter thread, every 20 ms.
    The reporter is the thread at nice 10 (app/reporter.cpp lowers itself
    so; no other thread of a run without --report does)."""

    def __init__(self, pid):
        self.pid = pid
        self.tid = None
        self.samples = []  # (CLOCK_MONOTONIC ns, run delay ns)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _find(self):
        for tid in os.listdir(f"/proc/{self.pid}/task"):
            with open(f"/proc/{self.pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[16]) == 10:  # field 19, nice: the 17th after the comm
                return int(tid)
        return None

    def _run(self):
        while not self._stop.wait(0.02):
            try:
                if self.tid is None:
                    self.tid = self._find()
                    continue
                with open(f"/proc/{self.pid}/task/{self.tid}/schedstat") as f:
                    delay = int(f.read().split()[1])
                self.samples.append((time.monotonic_ns(), delay))
            except (OSError, ValueError, IndexError):
                return

    def stop(self):
        self._stop.set()
        self._t.join(2)

    def between(self, a_ns, b_ns):
        """Seconds the reporter waited for a CPU within [a, b], at least:
        from the first sample after a to the last before b (0 when none)."""
        after = [d for t, d in self.samples if t >= a_ns]
        before = [d for t, d in self.samples if t <= b_ns]
        if not after or not before:
            return 0.0
        return max(0, before[-1] - after[0]) / 1e9


def innocent_latencies(jb, target, threshold_ms):
    """(seconds from each long task's end to its record's arrival, the
    seconds of that the reporter waited for a CPU, the records): every long
    task of the innocent must have its jank record."""
    timed = [(t, r) for t, r in jb.timed("jank") if r["pid"] == target.pid]
    delay = getattr(jb, "reporter_delay", None)
    out = []
    for task in target.long_tasks(threshold_ms):
        hit = [(t, r) for t, r in timed if abs(r["begin_monotonic_ns"] - task["begin_ns"]) < 20_000_000]
        assert hit, f"no record for the innocent's task {task}; its records: {[r for _, r in timed]}"
        waited = delay.between(task["end_ns"], hit[0][0]) if delay else 0.0
        out.append(((hit[0][0] - task["end_ns"]) / 1e9, waited, hit[0][1]))
    return out


def check_innocent(jb, target, threshold_ms, tasks):
    """The innocent's records: each with its build-id, cgroup and a
    symbolized stack in its own binary. Returns the worst latency in the
    reporter's own time (wall less its wait for a CPU: see ON_TIME_S)."""
    if getattr(jb, "reporter_delay", None):
        jb.reporter_delay.stop()
        assert jb.reporter_delay.samples, "the reporter thread (nice 10) was never found"
    timed = innocent_latencies(jb, target, threshold_ms)
    assert len(timed) >= tasks, f"{len(timed)} of the innocent's {tasks} long tasks reported"
    lat = [(wall - waited, r) for wall, waited, r in timed]
    worst = max(s for s, _ in lat)
    wall, waited, _ = max(timed, key=lambda x: x[0] - x[1])
    print(f"the innocent's worst record: {wall:.3f} s after its task, {waited:.3f} s of it the reporter "
          f"waited for a CPU; its own time {worst:.3f} s")
    for s, r in lat:
        assert r["bundle_version"], r
        assert r["cgroup"], r
        assert r["samples"] > 0 and "jank_target(" in r["heaviest_stack"], r["heaviest_stack"]
        assert "budget_exceeded" not in r, (r["budget_exceeded"], r["exe"], r.get("frames_missing"), r["heaviest_stack"])
    return worst


def start_jankbpf(*args, env=None):
    jb = Jankbpf("--ignore-startup-time", IGNORE, "--threshold", "100", "--log-type", "1", "--dev",
                 "--report-times-per-app", "3", *args, env={**os.environ, **env} if env else None)
    jb.reporter_delay = ReporterDelay(jb.proc.pid)
    return jb


def innocent(n=6, name="innocent"):
    # Spins of 250 ms, 1 s apart: each sampled and reported while the attack
    # runs. Named as the attacker when jankbpf watches by --comm.
    return Target.start(f"spin:250x{n}", start_delay=4, gap_ms=1000, name=name)


def innocent_watched_by_comm(tasks, env=None):
    """An innocent named as the attackers, all watched by --comm until its
    `tasks` long tasks are done: (the stopped jankbpf, the innocent)."""
    with innocent(tasks, name="hostile_budget") as target:
        jb = start_jankbpf("--comm", "hostile_budget", env=env)
        target.wait_done(timeout=60)
        jb.stop(signal.SIGTERM)
    return jb, target


def test_sparse_elf_files_cost_their_headers_not_their_size(tmp_path):
    """Two sparse 1 GiB ELF files mapped executable, their section headers
    claiming a .symtab and DWARF in the holes. Before: 2,165 MiB of memfd
    copies and the innocent's record 3.9 s late. Now only what is read is
    copied, within 256 MiB a file: jankbpf grows by under 64 MiB."""
    atk = Attacker(HOSTILE, "--spin", "300", "--gap", "300", "sparse", "{dir}", "2", "1024")
    try:
        apid = atk.wait_ready()
        with innocent() as target:
            jb = start_jankbpf("--pid", str(apid), "--pid", str(target.pid))
            watch = Watch(jb.proc.pid)
            target.wait_done(timeout=60)
            # The attacker's own janks came, and its files were looked at.
            assert jb.wait_for(lambda r: r.get("type") == "jank" and r["pid"] == apid, timeout=10)
            watch.stop()
            jb.stop(signal.SIGTERM)
        worst = check_innocent(jb, target, 100, 6)
        print(f"sparse ELF: {watch}; innocent's worst record latency {worst:.3f} s (own time)")
        assert watch.max_rss - watch.base_rss < 64 * 1024, str(watch)
        assert worst < ON_TIME_S, f"the innocent's record came {worst:.2f} s after its task, in the reporter's own time"
    finally:
        atk.stop()


def test_thirty_thousand_little_elf_files_take_no_descriptors(tmp_path):
    """30,000 distinct 64-byte ELF files mapped executable. Before: one
    descriptor each, jankbpf at its limit (19,997), the innocent's records
    without build-id, cgroup or stack. Now a process gets 512 new modules,
    none holds a descriptor: jankbpf's descriptors grow by at most the 32 of
    its ELF source pool and the innocent's records are complete and on time."""
    atk = Attacker(HOSTILE, "--spin", "300", "--gap", "300", "many", "{dir}", "30000")
    try:
        apid = atk.wait_ready(timeout=180)
        with innocent() as target:
            jb = start_jankbpf("--pid", str(apid), "--pid", str(target.pid))
            watch = Watch(jb.proc.pid)
            target.wait_done(timeout=60)
            watch.stop()
            jb.stop(signal.SIGTERM)
        worst = check_innocent(jb, target, 100, 6)
        s = jb.summary()
        print(f"30,000 ELF files: {watch}; innocent's worst record latency {worst:.3f} s (own time); budgets {s['budgets']}")
        assert watch.max_fds <= watch.base_fds + 64, str(watch)
        assert s["budgets"]["modules_refused"] > 0, s["budgets"]
        assert worst < ON_TIME_S, f"the innocent's record came {worst:.2f} s after its task, in the reporter's own time"
    finally:
        atk.stop()


def test_one_uids_slow_files_do_not_hold_up_another_uids_records(tmp_path):
    """The reporter is one thread: one uid's slow work (here a slow
    filesystem it controls, JANKBPF_TEST_SLOW_OPEN_MS: each of its files
    takes 0.4 s to open) must not delay another uid's records. 12 nobody
    processes each map 20 files of their own and jank 3 times a second:
    their pins want ~30 s of the reporter a second. The uid gets 0.5 s of
    it, then 0.25 s a second; its skipped jobs are counted and its records
    say "reporter_time"; the innocent's records are complete and within
    SLOW_ON_TIME_S (2.8 s) of the reporter's own time.
    (The build before issue 26 has neither the seam nor the bucket.)"""
    n = 12
    atk = Attacker(HOSTILE, "--spin", "200", "--gap", "100", "--procs", str(n), "many", "{dir}", "20")
    try:
        for _ in range(n):
            atk.wait_ready()
        jb, target = innocent_watched_by_comm(8, env={"JANKBPF_TEST_SLOW_OPEN_MS": str(int(SLOW_OPEN_S * 1000))})
        s = jb.summary()
        slow = [r for r in jb.of_type("jank") if r["uid"] == 65534]
        worst = check_innocent(jb, target, 100, 8)
        print(f"slow files of one uid: {len(slow)} of its janks, {s['budgets']['reporter_time_skipped']} of its "
              f"jobs skipped; the innocent's worst record latency {worst:.3f} s (own time)")
        assert s["budgets"]["reporter_time_skipped"] > 0, s["budgets"]
        assert any("reporter_time" in r.get("budget_exceeded", []) for r in slow), slow[-2:]
        assert worst < SLOW_ON_TIME_S, f"the innocent's record came {worst:.2f} s after its task, in the reporter's own time"
    finally:
        atk.stop()


def test_a_256_mib_perf_map_is_read_within_its_budget(tmp_path):
    """A 256 MiB /tmp/perf-PID.map of 6-byte lines, the tasks in JIT code.
    Before: 19 -> 3,374 MiB. Now it is read as a stream, 1M entries and
    64 MiB a process at most; the record says "perf_map"."""
    atk = Attacker(HOSTILE, "--spin", "300", "--gap", "300", "perfmap", "256")
    try:
        apid = atk.wait_ready(timeout=120)
        with innocent() as target:
            jb = start_jankbpf("--pid", str(apid), "--pid", str(target.pid))
            watch = Watch(jb.proc.pid)
            target.wait_done(timeout=60)
            watch.stop()
            jb.stop(signal.SIGTERM)
        worst = check_innocent(jb, target, 100, 6)
        janks = jb.of_type("jank", apid)
        print(f"256 MiB perf map: {watch}; innocent's worst {worst:.3f} s; attacker's janks "
              f"{[j.get('budget_exceeded') for j in janks]}")
        assert watch.max_rss - watch.base_rss < 160 * 1024, str(watch)
        assert any("perf_map" in j.get("budget_exceeded", []) for j in janks), janks[-1:]
        assert worst < ON_TIME_S, f"the innocent's record came {worst:.2f} s after its task, in the reporter's own time"
    finally:
        atk.stop()


def test_an_executable_note_claiming_4_gib_is_read_by_its_header(tmp_path):
    """A static executable whose first PT_NOTE claims the rest of a sparse
    4 GiB file. Before: +3,185 MiB (libdw read the note whole), again for
    every new identity of the file. Now notes are walked by header."""
    atk_dir = tempfile.mkdtemp(prefix="jankbpf-attack-", dir="/var/tmp")
    os.chmod(atk_dir, 0o777)
    exe = os.path.join(atk_dir, "noted")
    shutil.copy(HOSTILE, exe)
    size = 4 << 30
    # The first note segment and the first note section (which libdw reads
    # first) both claim to the end of the file.
    with open(exe, "r+b") as f:
        eh = f.read(64)
        word = lambda b, at, n: int.from_bytes(b[at:at + n], "little")
        phoff, phentsize, phnum = word(eh, 32, 8), word(eh, 54, 2), word(eh, 56, 2)
        shoff, shentsize, shnum = word(eh, 40, 8), word(eh, 58, 2), word(eh, 60, 2)
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            ph = bytearray(f.read(phentsize))
            if word(ph, 0, 4) == 4:  # PT_NOTE
                claim = (size - word(ph, 8, 8)).to_bytes(8, "little")
                ph[32:40] = ph[40:48] = claim  # p_filesz, p_memsz
                f.seek(phoff + i * phentsize)
                f.write(ph)
                break
        for i in range(shnum):
            f.seek(shoff + i * shentsize)
            sh = bytearray(f.read(shentsize))
            if word(sh, 4, 4) == 7:  # SHT_NOTE
                sh[32:40] = (size - word(sh, 24, 8)).to_bytes(8, "little")  # sh_size
                f.seek(shoff + i * shentsize)
                f.write(sh)
                break
        f.truncate(size)
    os.chmod(exe, 0o755)
    procs = []
    try:
        with innocent(name="noted") as target:
            jb = start_jankbpf("--comm", "noted")
            watch = Watch(jb.proc.pid)
            # Two runs, the file touched between them: a new identity each.
            for _ in range(2):
                p = subprocess.Popen(NOBODY + [exe, "--spin", "300", "--gap", "300", "--seconds", "6", "jit"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                procs.append(p)
                assert p.stdout.readline().startswith("ready"), p.stderr.read()
                assert jb.wait_for(lambda r, pid=p.pid: r.get("type") == "jank" and r["pid"] == pid, timeout=15), \
                    f"no record of the process within 15 s; {watch}"
                p.wait(30)
                os.utime(exe)
            target.wait_done(timeout=60)
            watch.stop()
            jb.stop(signal.SIGTERM)
        noted = [r for r in jb.of_type("jank") if r["pid"] in {p.pid for p in procs}]
        print(f"4 GiB note: {watch}; {len(noted)} janks, bundle_version {noted[0]['bundle_version']!r}")
        assert watch.max_rss - watch.base_rss < 64 * 1024, str(watch)
        # Read while each process lived (its last record may come after it
        # exited, when /proc/PID/exe is gone).
        for p in procs:
            assert any(r["bundle_version"] for r in noted if r["pid"] == p.pid), noted
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        shutil.rmtree(atk_dir, ignore_errors=True)


PYTHON_ATTACK = r"""
import ctypes, sys, time, types
ctypes.CDLL(None).prctl(15, b"pyattack", 0, 0, 0)  # PR_SET_NAME: jankbpf watches --comm pyattack
# 8,100 code objects sharing one 64 KiB line table (the same bytes object).
big = bytes([0x80 | (13 << 3) | 7, 0]) * 32768
def leaf(n):
    end = time.monotonic() + 0.01
    while time.monotonic() < end:
        n += 1
    return n
def link(n):
    return nxt(n)
codes = [link.__code__.replace(co_linetable=big, co_name=f"f{i}", co_qualname=f"f{i}") for i in range(8100)]
def chain(block):
    # 100 frames, each a different code object, then 10 ms of work.
    fn = leaf
    for c in reversed(block):
        fn = types.FunctionType(c, {"nxt": fn, "__builtins__": __builtins__})
    return fn
import select
ep = select.epoll()
print("ready", flush=True)
start = 0
stop = time.monotonic() + float(sys.argv[1])
while time.monotonic() < stop:
    ep.poll(0.3)
    # A task of ~300 ms: 30 chains of 100 new code objects each.
    for k in range(30):
        block = codes[start:start + 100]
        start = (start + 100) % 8100
        chain(block)(0)
"""


def test_python_code_objects_sharing_a_line_table_cost_it_once(tmp_path):
    """Two CPython processes, each with 8,100 code objects sharing one
    64 KiB line table, running through them. Before: ~512 MiB a process
    (every code object's table read and cached). Now a table is read once,
    a process's code cache holds at most 4 MiB, a walk reads at most 1 MiB."""
    script_dir = tempfile.mkdtemp(prefix="jankbpf-attack-", dir="/var/tmp")
    os.chmod(script_dir, 0o755)
    script = os.path.join(script_dir, "codes.py")
    with open(script, "w") as f:
        f.write(PYTHON_ATTACK)
    os.chmod(script, 0o644)
    pys = []
    try:
        with innocent(8, name="pyattack") as target:
            jb = start_jankbpf("--comm", "pyattack")
            watch = Watch(jb.proc.pid)
            for _ in range(2):
                p = subprocess.Popen(NOBODY + ["/usr/bin/python3", script, "12"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
                pys.append(p)
                assert p.stdout.readline().startswith("ready"), p.stderr.read()
            for p in pys:
                p.wait(60)
            target.wait_done(timeout=60)
            watch.stop()
            jb.stop(signal.SIGTERM)
        janks = [r for r in jb.of_type("jank") if r["pid"] in {p.pid for p in pys}]
        frames = [f for r in janks for f in r["stack"] if f.get("runtime") == "python"]
        print(f"Python code objects: {watch}; {len(janks)} janks, {len(frames)} Python frames in their stacks")
        assert janks and frames, "the attacker's Python frames were not read at all"
        assert watch.max_rss - watch.base_rss < 96 * 1024, str(watch)
        check_innocent(jb, target, 100, 8)
    finally:
        for p in pys:
            if p.poll() is None:
                p.kill()
        shutil.rmtree(script_dir, ignore_errors=True)


def test_a_device_over_the_perf_map_is_never_opened(tmp_path):
    """In its own user and mount namespace an unprivileged process
    bind-mounts a root-only character device over its perf-map path. Before:
    root jankbpf opened it (inotify saw 4 opens), then refused it. Now the
    path is looked at through O_PATH and only a regular file is opened."""
    dev_dir = tempfile.mkdtemp(prefix="jankbpf-dev-", dir="/var/tmp")
    os.chmod(dev_dir, 0o755)
    dev = os.path.join(dev_dir, "null")
    os.mknod(dev, 0o600 | 0o020000, os.makedev(1, 3))  # a /dev/null of root's only
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    ino = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    assert ino >= 0 and libc.inotify_add_watch(ino, dev.encode(), 0x20) >= 0  # IN_OPEN
    # The perf map of the process `exec`ing below is /tmp/perf-$$.map in its namespace.
    shell = ("mount -t tmpfs none /tmp && touch /tmp/perf-$$.map && "
             f"mount --bind {dev} /tmp/perf-$$.map && exec {{exe}} --spin 300 --gap 300 jit")
    atk = Attacker(shell=f"exec unshare -Urm sh -c '{shell}'")
    try:
        apid = atk.wait_ready()
        with innocent() as target:
            jb = start_jankbpf("--pid", str(apid), "--pid", str(target.pid), "-vv")
            target.wait_done(timeout=60)
            assert jb.wait_for(lambda r: r.get("type") == "jank" and r["pid"] == apid, timeout=10)
            jb.stop(signal.SIGTERM)
        opens = 0
        while True:
            try:
                opens += len(os.read(ino, 65536)) // 16  # struct inotify_event, no name
            except BlockingIOError:
                break
        refused = [l for l in jb.stderr_lines if "perf map of pid" in l]
        print(f"device perf map: {opens} opens of the device; jankbpf said {refused[:1]}")
        assert any("a character device" in l for l in refused), jb.stderr[-2000:]
        assert opens == 0, f"jankbpf opened the device {opens} times"
        check_innocent(jb, target, 100, 6)
    finally:
        atk.stop()
        os.close(ino)
        shutil.rmtree(dev_dir, ignore_errors=True)


def test_four_hundred_sleepy_processes_get_their_rate_not_the_output(tmp_path):
    """400 processes of one uid whose tasks sleep 110 ms. Before: ~2,600
    records a second into the output (650 GiB a day) and lost events on the
    ring everyone shares. Now --record-rate (10 a second a process) and
    --record-rate-uid (100 a second a uid, a bucket of 1,000) hold them back
    in the kernel, counted per process; another uid's records are all there,
    on time."""
    seconds = 10
    atk = Attacker(HOSTILE, "--sleep", "110", "--gap", "10", "--seconds", str(seconds + 20), "sleepy", "400",
                   full_share=True)
    try:
        atk.wait_ready()
        with innocent(8, name="hostile_budget") as target:
            jb = start_jankbpf("--comm", "hostile_budget")
            watch = Watch(jb.proc.pid)
            t0 = time.monotonic()
            target.wait_done(timeout=60)
            watch.stop()
            took = time.monotonic() - t0
            jb.stop(signal.SIGTERM)
        s = jb.summary()
        flood = [r for r in jb.of_type("jank") if r["uid"] == 65534]
        budgets = s.get("budgets", {})
        print(f"400 sleepy processes: {len(flood)} of their records in {took:.1f} s, "
              f"records_rate_limited {s.get('records_rate_limited')}, lost_events {s['lost_events']}; {watch}; "
              f"most limited {budgets.get('rate_limited_uids', [])[:1]} {budgets.get('rate_limited_processes', [])[:2]}")
        # The uid's bucket: 1,000, then 100 a second (the kernel counts the rest).
        assert len(flood) <= 1000 + 100 * (took + 2), len(flood)
        losses = {k: s[k] for k in ("records_rate_limited", "lost_events", "offcpu_ring_full", "offcpu_rate_limited",
                                    "records_dropped", "samples_lost")}
        assert s["records_rate_limited"] > 0 and s["lost_events"] == 0, losses
        assert s["budgets"]["rate_limited_uids"][0]["uid"] == 65534, s["budgets"]
        assert any("record_rate" in r.get("budget_exceeded", []) and r.get("records_rate_limited", 0) > 0
                   for r in flood), flood[-3:]
        worst = check_innocent(jb, target, 100, 8)
        assert worst < ON_TIME_S, f"the innocent's record came {worst:.2f} s after its task, in the reporter's own time"
    finally:
        atk.stop()


def test_one_uids_sleepers_cannot_fill_the_captures_ring(tmp_path):
    """400 processes of one uid whose long tasks all go to sleep, and a
    reader that cannot drain for its first 3 s (JANKBPF_TEST_READER_PAUSE_MS,
    as a loaded host starves it). Each sleep of a long task sends a 17 KB
    capture, and each reported task ~3 KB of small records (early mark,
    end, cause). Before, with only per-process buckets for captures and a
    uid bucket of 1,000 tasks (3 MB) for records, both rings every uid
    shares overflowed (2,758 to 4,645 records lost here; CI on 6f54552 lost
    118 without a pause). Now a uid's captures come from one bucket of 60,
    and while the events ring is over half full a uid gets an eighth of its
    record bucket: nothing is lost, the rest is counted as rate-limited,
    and another uid's records are complete and on time."""
    atk = Attacker(HOSTILE, "--sleep", "110", "--gap", "10", "--seconds", "40", "sleepy", "400", full_share=True)
    try:
        atk.wait_ready()
        jb, target = innocent_watched_by_comm(6, env={"JANKBPF_TEST_READER_PAUSE_MS": "3000"})
        s = jb.summary()
        print(f"400 sleepers, reader paused 3 s: offcpu_ring_full {s['offcpu_ring_full']}, "
              f"offcpu_rate_limited {s['offcpu_rate_limited']}, lost_events {s['lost_events']}")
        assert s["offcpu_ring_full"] == 0 and s["lost_events"] == 0, json.dumps({k: v for k, v in s.items() if k != "bpf"})
        assert s["offcpu_rate_limited"] > 0, s
        check_innocent(jb, target, 100, 6)
    finally:
        atk.stop()
