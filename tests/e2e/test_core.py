"""End-to-end tests of the core detector: real BPF programs against
tests/apps/jank_target, whose ground truth every report is checked against.

jankbpf's minimum --ignore-startup-time is 3 s (the seed's rule), so every
target idles START_DELAY seconds before its first scripted task.
"""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from harness import (SPAN_MS, Jankbpf, close_to_task, held_bpf_ids, held_map_ids, maps_still_loaded, need, run_jankbpf,
                     still_loaded, JANKBPF)
import target as target_mod
from target import DOMINANT_STATE
from sched_trace import SchedTrace

# The target runs SCHED_FIFO (below its own hogs): nice does not cross
# scheduler autogroups, so at nice -20 another session's load still took
# the CPU from a spinning task; a real-time class keeps it, and each kind of
# task spends >= 90% of its time in its own state on a busy machine too.
# The split is also checked against the app's own accounting of the same
# task (--measure: CLOCK_THREAD_CPUTIME_ID and schedstat's run_delay).
NICE = -20
FIFO = 1

# The targets' scheduler events as ftrace records them: a second account of
# the split, stamped at the tracepoints jankbpf uses (see sched_trace.py).
# Every test here has one.
SCHED = None


@pytest.fixture(autouse=True)
def sched_trace():
    global SCHED
    with SchedTrace(["jank_target", "jb-*", "jt-worker-*"]) as trace:
        SCHED = trace
        yield trace
    SCHED = None


def command(script, **kw):
    kw.setdefault("nice", NICE)
    kw.setdefault("fifo", FIFO)
    kw.setdefault("measure", True)
    return target_mod.command(script, **kw)


class Target(target_mod.Target):
    @classmethod
    def start(cls, script="", **kw):
        kw.setdefault("nice", NICE)
        kw.setdefault("fifo", FIFO)
        kw.setdefault("measure", True)
        return super().start(script, **kw)

START_DELAY = 3.5
IGNORE = "3"
THRESHOLD = 150


def jank_by_begin(janks, task):
    """The jank record whose task began when the app's task did: the kernel
    stamps the wait's return, the app reads its clock after it, and in
    between the thread can lose its CPU (SPAN_MS and the run delay the app
    counted, as close_to_task allows) or, on this VM beside two compiles,
    spend 0.5-1.3 ms with no switch at all: the first task after the target's
    3.5 s start delay, the same without jankbpf attached (ftrace's sys_exit
    to the app's clock read). Tasks begin hundreds of ms apart."""
    slack = (SPAN_MS + task.get("edge_delay_ns", 0) / 1e6) * 1e6
    return [j for j in janks if abs(j["begin_monotonic_ns"] - task["begin_ns"]) <= slack]


def assert_states_match(task, j):
    """jankbpf's state split agrees with the app's own measure of the task, and
    the task spends its off-CPU time in the state its kind is built for."""
    parts = j["state_ms"]
    # The app reads its clocks a few µs after the wait returns and before the
    # next one; on a loaded machine it can lose its CPU in between (3 ms),
    # and time stolen from the VM or spent in interrupts grows with the task
    # (2 % of the app's own length, not of the record's under test).
    tol = 3.0 + 0.02 * task["dur_ns"] / 1e6
    if "cpu_ns" in task:
        cpu, delay = task["cpu_ns"] / 1e6, task["run_delay_ns"] / 1e6
        # What the thread's CPU clock and run delay leave unexplained: off
        # the CPU, or on it while the VM was stolen or in interrupts (time
        # the CPU clock does not count and jankbpf, going by switches, calls
        # running; seen: 11 of 250 ms of an O_DIRECT reader).
        unexplained = task["dur_ns"] / 1e6 - cpu - delay
        off_cpu = parts["sleeping"] + parts["blocked_io"]
        where = f"{task['kind']}: jankbpf {parts}, app cpu {cpu:.3f} run_delay {delay:.3f}"
        # On a CPU or queued for one: the sum, not the split, is what the
        # app's clocks can check. A wakeup that preempts the CPU's current
        # task makes the scheduler skip its clock update at the switch that
        # follows (wakeup_preempt: rq_clock_skip_update), so the thread's
        # CPU clock starts before its switch-in and run_delay gains nothing:
        # time it queued is CPU time to the app (seen beside a compile: an
        # io:250 task with cpu 34.6, run_delay 29.6 ms, where jankbpf had
        # running 18.4, runnable 41.1 and the sched trace below 18.7, 41.0).
        # So run_delay bounds runnable from below only; the split itself is
        # held to the trace.
        assert parts["runnable"] >= delay - tol, where
        assert parts["running"] + parts["runnable"] >= cpu + delay - tol, where
        assert off_cpu <= unexplained + tol, where
    # The same tracepoints timed by ftrace instead of jankbpf's programs: the
    # two clocks are read microseconds apart at each of a few hundred
    # switches (seen: within 0.07 ms a part on this VM). Where the kernel
    # traced no switch to or from a hidden thread, ftrace is as blind as
    # jankbpf's programs, and jankbpf repairs the gap from the thread's
    # counters: only the app's clocks above check it then.
    if SCHED is not None and SCHED.unseen_in(j) == 0:
        traced = SCHED.of_jank(j)
        tol_traced = 1.0 + 0.005 * task["dur_ns"] / 1e6
        where = f"{task['kind']}: jankbpf {parts}, sched trace {traced}"
        for state in ("running", "runnable", "sleeping", "blocked_io"):
            assert abs(parts[state] - traced[state]) <= tol_traced, where
    want = DOMINANT_STATE.get(task["kind"])
    if want == "blocked_io":
        # O_DIRECT reads cost CPU between the waits (5-10% here; with four
        # spinners in another session, 38 of 156 ms, the sched trace
        # agreeing): of the time off the CPU, nearly all is D state, and
        # the task is off the CPU for most of its length.
        off = parts["sleeping"] + parts["blocked_io"]
        assert parts[want] >= 0.90 * off, f"{task['kind']}: {want} only {parts[want]} of {off:.3f} ms off-CPU ({parts})"
        assert off >= 0.5 * j["duration_ms"], (task["kind"], parts)
    elif want:
        # Time the app itself measured waiting for a CPU (checked against
        # jankbpf's runnable above) is not the task's own state: two FIFO
        # spinners on two CPUs still lose 50 ms a second to the kernel's
        # fair server or RT throttling (seen: 48 of 225 ms under CI).
        base = j["duration_ms"]
        if want != "runnable" and "run_delay_ns" in task:
            base -= task["run_delay_ns"] / 1e6
        assert parts[want] >= 0.90 * base, f"{task['kind']}: {want} only {parts[want]:.3f} of {base:.3f} ms not spent waiting for a CPU ({parts})"


def assert_matches_truth(janks, target, threshold=THRESHOLD, worker=0):
    """Every task >= threshold reported exactly once, with the right length
    and dominant state; nothing else reported."""
    long_tasks = [t for t in target.long_tasks(threshold, worker=worker) if t["kind"] != "short"]
    matched = set()
    for task in long_tasks:
        found = jank_by_begin(janks, task)
        near = [(round((j["begin_monotonic_ns"] - task["begin_ns"]) / 1e6, 3), j["duration_ms"]) for j in janks]
        assert len(found) == 1, (f"task {task['kind']}:{task.get('arg')} reported {len(found)} times; "
                                 f"janks (begin - task's begin, duration ms): {near}; task {task}")
        j = found[0]
        matched.add(id(j))
        assert close_to_task(j["duration_ms"], task), (task, j["duration_ms"])
        parts = j["state_ms"]
        assert abs(sum(parts.values()) - j["duration_ms"]) < 0.01
        assert_states_match(task, j)
        assert j["tid"] == task["tid"]
        assert j["wait_syscall"] == task["wait"]
    spurious = [j for j in janks if id(j) not in matched]
    assert not spurious, f"reported tasks the app did not run over {threshold} ms: {spurious}"


def test_every_long_task_reported_once_with_true_length_and_state(tmp_path):
    script = ("spin:200,sleep:250,io:250,runnable:250,short:3000,"
              "spin:100,sleep:120,spin:140,spin:300x2")
    truth = tmp_path / "truth.jsonl"
    jb = Jankbpf("--ignore-startup-time", IGNORE, "--",
                 *command(script, start_delay=START_DELAY, truth=truth, io_dir=str(tmp_path)))
    target = Target.follow(truth)
    target.wait_done(timeout=60)
    rc = jb.wait(timeout=30)
    target.kill()
    assert rc == 0, jb.stderr
    pid = target.pid
    janks = jb.of_type("jank", pid)
    assert len(target.long_tasks(THRESHOLD)) == 6
    assert_matches_truth(janks, target)
    for j in janks:
        assert j["threshold_ms"] == THRESHOLD
        assert j["bundle_name"] == "jank_target"
        assert j["exe"].endswith("/jank_target")
        assert len(j["bundle_version"]) == 40
        assert j["begin_time"] <= j["end_time"]
        assert j["seen_running"], "crossing not seen while the task ran"
        # Stacks for every task that ran or slept; one spent waiting for a
        # CPU behind a real-time hog may never run to be sampled. The
        # sampling clocks go on when jankbpf's event thread gets a CPU after
        # the early mark: on a loaded host (CI runs fuzzers and qemu beside
        # this) that can come after a spin ends, and the record says so.
        if j["state_ms"]["runnable"] < 0.5 * j["duration_ms"] and j["samples"] == 0:
            unsampled = j.get("unsampled_ms", 0)
            assert unsampled >= j["state_ms"]["running"] - THRESHOLD / 3 - 2 * 10, f"no stacks for a long task: {j}"
        if j["samples"] == 0:
            assert not j["heaviest_stack"]
        else:
            assert j["heaviest_stack"]
        for path in j["external_log"]:
            assert os.path.isfile(path)
    summary = jb.summary()
    assert summary["lost_events"] == 0
    assert summary["unsampled_tasks"] == sum(1 for j in janks if "unsampled_ms" in j)
    # 3000 short tasks + the scripted ones + idle wakeups, all counted in the kernel.
    assert summary["tasks_checked"] >= 3000 + 10
    assert summary["janks"] == len(janks)
    exits = jb.of_type("exit", pid)
    assert len(exits) == 1 and exits[0]["exit_code"] == 0 and exits[0]["target"]


@pytest.mark.parametrize("watchdog", ["timer", "scan"])
def test_stuck_task_gives_hang_while_stuck(watchdog):
    with Target.start("spin:200,stuck,spin:200", start_delay=START_DELAY) as target:
        jb = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE,
                     "--watchdog", watchdog)
        stuck = target.wait_stuck(timeout=30)
        hang = jb.wait_for(lambda r: r.get("type") == "hang", timeout=6)
        assert hang is not None, f"no hang record while stuck; stderr: {jb.stderr}"
        assert not target.done, "the hang was reported only after the task ended"
        assert hang["pid"] == target.pid and hang["tid"] == target.pid
        assert abs(hang["begin_monotonic_ns"] - stuck["begin_ns"]) < 1_000_000
        # Within one check of the 3 s mark (timer: µs; scan: one 5 ms tick).
        assert 3000 <= hang["duration_ms"] < 3015, hang["duration_ms"]
        assert hang["state_ms"]["sleeping"] / hang["duration_ms"] > 0.9
        target.release()
        assert target.wait(30) == 0
        rc = jb.wait(timeout=15)  # the only --pid target exited: jankbpf exits 0
    assert rc == 0, jb.stderr
    janks = jb.of_type("jank", target.pid)
    stuck_jank = [j for j in janks if j["task_seq"] == hang["task_seq"]]
    assert len(stuck_jank) == 1 and stuck_jank[0]["duration_ms"] > 3000
    assert_matches_truth(janks, target)
    assert len(jb.of_type("hang")) == 1
    assert jb.summary()["watchdog"] == watchdog
    assert len(jb.of_type("exit", target.pid)) == 1


def test_pid_target_must_exist():
    rc, records, err = run_jankbpf("--pid", "4000000")
    assert rc == 2
    assert "4000000" in err and "no such process" in err
    assert records == []


@pytest.mark.parametrize("args,needle", [
    (["--threshold", "0"], "--threshold"),
    (["--ignore-startup-time", "1"], "--ignore-startup-time"),
    (["--threads", "few"], "--threads"),
    (["--pid", "1", "--comm", "x"], "excludes"),
    (["--threshold", "500", "--trace-threshold", "400"], "--trace-threshold"),
    (["--no-such-flag"], "unknown option '--no-such-flag'"),
    (["--pid", "1", "--treshold", "100"], "unknown option '--treshold' (did you mean --threshold?)"),
    (["--pid", "1", "foo"], "unexpected argument 'foo': a command to run goes after '--'"),
    (["--pid", "1", "--", "true"], "--pid excludes -- CMD"),
    (["--"], "'--' must be followed by a command to run"),
])
def test_bad_usage_exits_2_and_says_what(args, needle):
    rc, records, err = run_jankbpf(*args)
    assert rc == 2
    assert needle in err
    assert records == []


def test_not_root_exits_1_naming_capabilities():
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        "--inh-caps=-all", JANKBPF, "--duration", "1"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert "CAP_BPF" in p.stderr and "CAP_PERFMON" in p.stderr
    assert p.stdout == ""


def test_command_exit_status_is_passed_on(tmp_path):
    truth = tmp_path / "t.jsonl"
    rc, records, err = run_jankbpf("--ignore-startup-time", IGNORE, "--",
                                   *command("spin:200,exit:7", start_delay=START_DELAY,
                                            truth=truth))
    assert rc == 7, err
    types = [r["type"] for r in records]
    assert types == ["jank", "exit", "summary"], types
    assert records[1]["exit_code"] == 7
    rc, _, err = run_jankbpf("--", "/nonexistent/program")
    assert rc == 127 and "cannot run" in err


def test_comm_filters_in_kernel():
    with Target.start("spin:250,spin:250", start_delay=START_DELAY, name="jb-wanted") as wanted, \
         Target.start("spin:250,spin:250", start_delay=START_DELAY, name="jb-other") as other:
        jb = Jankbpf("--comm", "jb-wanted", "--ignore-startup-time", IGNORE)
        wanted.wait_done(30)
        other.wait_done(30)
        wanted.wait(10)
        other.wait(10)
        time.sleep(0.3)
        rc = jb.stop()
    assert rc == 0
    assert_matches_truth(jb.of_type("jank", wanted.pid), wanted)
    assert jb.of_type("jank", other.pid) == []
    assert all(r["pid"] == wanted.pid for r in jb.of_type("jank"))


def test_threads_main_vs_all():
    script = "spin:200"
    with Target.start(script, start_delay=START_DELAY, threads=1,
                      worker_script="spin:220,sleep:230") as target:
        main_only = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE)
        every = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE,
                        "--threads", "all")
        target.wait_done(30)
        target.wait(10)
        main_only.wait(15)
        every.wait(15)
    worker_tid = target.workers[0]
    assert_matches_truth(main_only.of_type("jank"), target)
    all_janks = every.of_type("jank")
    assert_matches_truth([j for j in all_janks if j["tid"] == target.pid], target)
    worker_janks = [j for j in all_janks if j["tid"] == worker_tid]
    assert_matches_truth(worker_janks, target, worker=1)
    assert len(worker_janks) == 2
    assert all(j["thread_name"].startswith("jt-worker") for j in worker_janks)


def test_ignore_startup_time():
    # Janks at 0.5 s and 1 s into the process fall inside a 3 s startup
    # window; the ones after 3.5 s do not.
    with Target.start("spin:200,spin:200,sleep:2600,spin:250,spin:250", gap_ms=300) as target:
        jb = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE)
        target.wait_done(30)
        target.wait(10)
        jb.wait(15)
    janks = jb.of_type("jank")
    starts = [t for t in target.long_tasks(THRESHOLD)]
    assert len(starts) == 5
    started = target.ready["mono_ns"]
    late = [t for t in starts if t["begin_ns"] - started > 3.2e9]
    assert len(late) == 2
    assert len(janks) == 2
    for task in late:
        assert len(jank_by_begin(janks, task)) == 1


def test_a_sleep_whose_switch_out_went_unseen_is_not_running():
    """Some VM kernels run no program for a switch to a host agent's thread
    (CI's sandbox: its init's tokio-rt-worker), so a watched thread that
    goes to sleep with that switch is still recorded as running. Woken off
    its CPU, it is split by the scheduler's counters: what it ran and
    queued, the rest asleep, on I/O where the scheduler counted it in the
    load (CI on 3e552a1: a frame's 800 ms sleep reported as running). Here
    every switch-out of the loop is hidden (test seam); the sched trace,
    which sees them, is the truth."""
    with Target.start("sleep:300,io:250", start_delay=START_DELAY) as target:
        jb = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE,
                     env={**os.environ, "JANKBPF_TEST_HIDE_SWITCHES_FROM": str(target.pid)})
        target.wait_done(30)
        time.sleep(0.3)
        assert jb.stop() == 0, jb.stderr[-2000:]
    assert "test seam JANKBPF_TEST_HIDE_SWITCHES_FROM" in jb.stderr, jb.stderr[-2000:]
    (summary,) = jb.of_type("summary")
    janks = jb.of_type("jank", target.pid)
    tasks = [t for t in target.long_tasks(THRESHOLD) if t["kind"] in ("sleep", "io")]
    assert [t["kind"] for t in tasks] == ["sleep", "io"], tasks
    for task in tasks:
        (j,) = jank_by_begin(janks, task)
        parts = j["state_ms"]
        assert abs(sum(parts.values()) - j["duration_ms"]) < 0.01
        traced = SCHED.of_jank(j)
        # Each repaired stretch is split by the thread's CPU time, not by
        # tracepoint stamps: its switch-in to its dequeue by the CPU clock
        # ran up to ~35 us past the stamped stretch on this VM under load
        # (ftrace beside it; an io task repairs ~500 such sleeps).
        repaired = sum(1 for state, _, _ in SCHED.stretches_of(j) if state in ("sleeping", "blocked_io"))
        tol = 1.0 + 0.005 * j["duration_ms"] + 0.1 * repaired
        where = f"{task['kind']}: jankbpf {parts}, sched trace {traced}, {repaired} sleeps repaired"
        for state in ("sleeping", "blocked_io"):
            assert abs(parts[state] - traced[state]) <= tol, where
        assert abs(parts["running"] + parts["runnable"] - traced["running"] - traced["runnable"]) <= tol, where
        want = DOMINANT_STATE[task["kind"]]
        assert parts[want] >= 0.5 * j["duration_ms"], where
    # Each wakeup out of a hidden sleep was one.
    assert summary["unseen_switches"] >= 2, summary


def test_system_wide_sees_processes_started_later():
    jb = Jankbpf("--ignore-startup-time", IGNORE)
    with Target.start("spin:250,io:200,spin:120", start_delay=START_DELAY) as target:
        target.wait_done(30)
        target.wait(10)
    time.sleep(0.3)
    rc = jb.stop()
    assert rc == 0
    assert_matches_truth(jb.of_type("jank", target.pid), target)
    # It had janks, so its exit is reported too.
    assert len(jb.of_type("exit", target.pid)) == 1


@pytest.mark.parametrize("loop", ["poll", "ppoll", "select", "pselect", "epoll_pwait",
                                  "epoll_pwait2"])
def test_every_wait_syscall_bounds_tasks(loop):
    with Target.start("spin:200,short:200,sleep:200", start_delay=START_DELAY,
                      loop=loop) as target:
        jb = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE)
        target.wait_done(30)
        target.wait(10)
        jb.wait(15)
    janks = jb.of_type("jank")
    assert len(janks) == 2
    assert_matches_truth(janks, target)


@pytest.mark.parametrize("tick", ["jiffies", "clock"])
def test_tasks_either_side_of_the_threshold(tick):
    """Where the kernel's tick rate is known, a task's end is told short by
    jiffies, with no clock read; without it (JANKBPF_DISABLE=tick_rate, as
    on a kernel whose config is nowhere) by the clock. Either way a task a
    few ms over the threshold is reported, with its true length, and one a
    few ms under is not: on a CPU (ticks run) and asleep (an idle CPU's
    jiffies catch up only when it wakes)."""
    env = {**os.environ, "JANKBPF_DISABLE": "tick_rate"} if tick == "clock" else None
    script = "spin:145,sleep:155,sleep:145,spin:155,io:156,short:50"
    with Target.start(script, start_delay=START_DELAY) as target:
        jb = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE, "--log-type", "1",
                     env=env)
        target.wait_done(30)
        target.wait(10)
        assert jb.wait(15) == 0, jb.stderr
    janks = jb.of_type("jank")
    assert sorted(j["duration_ms"] >= THRESHOLD for j in janks) == [True] * 3, janks
    assert_matches_truth(janks, target)
    (summary,) = jb.of_type("summary")
    assert ("tick_rate" in summary["features_missing"]) == (tick == "clock"), summary
    assert summary["tasks_checked"] >= 55, summary


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_signal_detaches_and_leaves_nothing_in_kernel(sig):
    # SIGHUP reopens --output; without --output (here) it stops as SIGTERM does.
    jb = Jankbpf("--ignore-startup-time", IGNORE)
    # This jankbpf's own programs and links (another jankbpf may run meanwhile).
    progs, links = held_bpf_ids(jb.proc.pid)
    assert len(progs) >= 10, "jankbpf's programs are not loaded while it runs"
    assert links, "jankbpf holds no BPF links while it runs"
    rc = jb.stop(sig)
    assert rc == 0
    summary = jb.summary()
    assert summary["lost_events"] == 0
    assert "detached" in jb.stderr
    left_progs, left_links = still_loaded(progs, links)
    assert not left_progs, "programs left loaded after exit"
    assert not left_links, "links left after exit"


# The Wayland entry points jankbpf's frame uprobes are on (system-wide).
WAYLAND_PROBED = ("wl_proxy_add_listener", "wl_proxy_marshal_array_flags")


def wayland_breakpoints():
    """Which probed functions' first bytes, as mapped in this process,
    differ from the library file's: a registered uprobe's breakpoint. None
    when the library is not installed."""
    import ctypes
    try:
        lib = ctypes.CDLL("libwayland-client.so.0")
    except OSError:
        return None
    probed = set()
    for name in WAYLAND_PROBED:
        addr = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        with open("/proc/self/maps") as maps:
            for line in maps:
                f = line.split()
                start, end = (int(x, 16) for x in f[0].split("-"))
                if start <= addr < end and len(f) >= 6:
                    with open(f[5], "rb") as so:
                        so.seek(addr - start + int(f[2], 16))
                        if so.read(4) != ctypes.string_at(addr, 4):
                            probed.add(name)
                    break
    return probed


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_perf_events_left_to_the_kernel_are_closed_after_exit(sig):
    """The stop does not wait for the perf events' slow closes (a grace
    period each, one after another under the kernel's event mutex): a map
    of jankbpf's holds them and the kernel closes them after the exit. They
    must be closed then, on a stop and on a SIGKILL: the map is gone, and
    the frame uprobes' breakpoints are out of libwayland-client's text."""
    need(wayland_breakpoints() is not None, "libwayland-client.so.0 is not installed (make deps installs it)")
    jb = Jankbpf("--ignore-startup-time", IGNORE, "-v")
    maps = held_map_ids(jb.proc.pid)
    assert wayland_breakpoints() == set(WAYLAND_PROBED), f"no breakpoint at the frame uprobes while attached: {jb.stderr}"
    if sig == signal.SIGKILL:
        jb.proc.send_signal(sig)
        jb.proc.wait(10)
    else:
        assert jb.stop(sig) == 0, jb.stderr
        m = re.search(r"(\d+) perf events left for the kernel to close after the exit", jb.stderr)
        assert m and int(m.group(1)) >= 4, jb.stderr  # the waits' tracepoints and the uprobes
        assert re.search(r"; 0 perf events closed here", jb.stderr), jb.stderr
    assert not maps_still_loaded(maps), "jankbpf's maps outlive it"
    # The kernel's worker closes them one after another, a grace period
    # each (~30 ms here), after those of any jankbpf that exited before.
    deadline = time.monotonic() + 30
    while wayland_breakpoints() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not wayland_breakpoints(), "a uprobe's breakpoint is left in libwayland-client after exit"


def test_fatal_signal_says_where_and_leaves_nothing_in_kernel():
    """A crash (a bug) is reported with a backtrace jankbpf's own build can
    be read against, and the kernel frees what the dead process held."""
    jb = Jankbpf("--ignore-startup-time", IGNORE)
    progs, links = held_bpf_ids(jb.proc.pid)
    rc = jb.stop(signal.SIGSEGV)
    assert rc == -signal.SIGSEGV, (rc, jb.stderr)
    assert re.search(r"fatal signal 11 in thread \d+", jb.stderr), jb.stderr
    assert re.search(r"jankbpf\(\+0x[0-9a-f]+\)", jb.stderr), jb.stderr
    left_progs, left_links = still_loaded(progs, links)
    assert not left_progs and not left_links


def test_duration_and_output_file(tmp_path):
    out = tmp_path / "records.jsonl"
    rc, records, err = run_jankbpf("--duration", "0.5", "--output", str(out))
    assert rc == 0, err
    assert records == []  # stdout carries nothing when --output is given
    lines = out.read_text().splitlines()
    assert len(lines) == 1 and '"type":"summary"' in lines[0]
    assert oct(os.stat(out).st_mode & 0o777) == "0o640"
    # A planted symlink is never written through.
    link = tmp_path / "link.jsonl"
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    link.symlink_to(victim)
    rc, _, err = run_jankbpf("--duration", "0.2", "--output", str(link))
    assert rc == 2 and "symlink" in err
    assert victim.read_text() == "keep\n"


@pytest.mark.parametrize("loop", ["epoll", "poll", "pselect"])
def test_raw_tracepoint_hooks_bound_tasks_and_leave_nothing(loop):
    """--hooks raw-tracepoint (x86_64): the waits hooked by two tp_btf
    programs on every syscall instead of a syscall tracepoint each. Tasks
    are the same as with the other hooks; the summary says which hooks ran;
    after the exit, nothing of this jankbpf is left in the kernel."""
    need(os.uname().machine == "x86_64", "--hooks raw-tracepoint is x86_64 only")
    with Target.start("spin:200,short:200,sleep:200", start_delay=START_DELAY,
                      loop=loop) as target:
        jb = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE,
                     "--hooks", "raw-tracepoint")
        progs, links = held_bpf_ids(jb.proc.pid)
        target.wait_done(30)
        target.wait(10)
        assert jb.wait(15) == 0, jb.stderr
    janks = jb.of_type("jank")
    assert len(janks) == 2, janks
    assert_matches_truth(janks, target)
    summary = jb.summary()
    assert summary["hooks"] == "raw_tracepoint", summary
    left_progs, left_links = still_loaded(progs, links)
    assert not left_progs and not left_links, (left_progs, left_links)


def test_summary_peak_rss_is_jankbpf_own_not_the_process_it_replaced():
    """max_rss_kb is jankbpf's own peak: a process holding 300 MB that execs
    jankbpf must not lend it its peak (getrusage's ru_maxrss carries it
    over exec; VmHWM does not). jankbpf itself peaks at ~25-55 MB."""
    code = ("import os, sys\n"
            "b = bytearray(300 << 20)\n"
            "for i in range(0, len(b), 4096): b[i] = 1\n"
            "os.execv(sys.argv[1], sys.argv[1:])\n")
    p = subprocess.run(["/usr/bin/python3", "-c", code, JANKBPF, "--comm", "no_such_comm_zz",
                        "--duration", "2", "--log-type", "1", "--log-dir", "/tmp/jankbpf-e2e-rss"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    (s,) = [json.loads(l) for l in p.stdout.splitlines() if '"summary"' in l]
    assert 1000 < s["max_rss_kb"] < 150_000, s["max_rss_kb"]
