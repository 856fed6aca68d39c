"""The first task after jankbpf attaches to a thread already idle in its wait
(issue 24): what a user does most, `sudo jankbpf --pid $(pidof app)` on an
idle app, then the slow click.

A BPF trampoline sees only the calls made after it is attached, so with
trampolines the return of a wait a thread was asleep in at attach is never
seen; bpf/adopt.bpf.h finds such threads at attach and begins their task at
the switch-in out of the wait. This host's kernel has no trampolines, so
each case runs twice: with the syscall tracepoints as they are, and with
JANKBPF_TEST_HIDE_RETURNS=1, which finds the threads as with trampolines and
hides that wait's return as a trampoline does (the kernel lane runs the same
targets under Debian's 6.1 with real trampolines: tests/kernels).

Each target is started first, idle in its wait (--start-on-signal), and
only then jankbpf; once jankbpf is attached SIGUSR2 ends the idle wait for
an fd, as a real event would, and the first task (spin:300) must be a jank
as long as the target's own clock says, with its stacks.
"""
import json
import os
import platform
import signal
import subprocess
import time

import pytest

from harness import BUILD, Jankbpf, close_to_app, close_to_task
from target import Target

IGNORE = "3"
# jank_target's --loop word -> (the syscall the kernel sees, its number here).
RESTART_SYSCALL = 128 if platform.machine() == "aarch64" else 219
if platform.machine() == "aarch64":
    LOOPS = {"epoll_pwait": ("epoll_pwait", 22), "epoll_pwait2": ("epoll_pwait2", 441),
             "ppoll": ("ppoll", 73), "pselect": ("pselect6", 72)}
else:
    LOOPS = {"epoll": ("epoll_wait", 232), "epoll_pwait": ("epoll_pwait", 281),
             "epoll_pwait2": ("epoll_pwait2", 441), "poll": ("poll", 7), "ppoll": ("ppoll", 271),
             "select": ("select", 23), "pselect": ("pselect6", 270)}
MODES = {"tracepoint": {}, "hidden-return": {"JANKBPF_TEST_HIDE_RETURNS": "1"}}
SPIN_MS = 300
# 50 ms (threshold / 3) to 300 ms at one sample per 10 ms: 25 expected.
# The sampling clocks are turned on by jankbpf's reader at the early mark,
# which a machine loaded by other work delays (16 seen here then); without
# a watchdog armed at the switch-in there would be none at all. That the
# early mark itself comes on time is test_stacks.py's first-task test.
MIN_SAMPLES = 10


def idle_targets(loops, **opts):
    """One jank_target per loop, idle in its wait, old enough that its first
    task is past --ignore-startup-time."""
    # nice -20: the spin keeps its CPU while other work loads the machine.
    targets = [Target.start(f"spin:{SPIN_MS},sleep:200", loop=loop, gap_ms=300, start_on_signal=True, nice=-20,
                            **opts) for loop in loops]
    for t, loop in zip(targets, loops):
        t.wait_asleep_in(LOOPS[loop][1])
    time.sleep(float(IGNORE) + 0.3)
    return targets


def env_for(mode):
    return {**os.environ, **MODES[mode]}


def check_first_task(jb, target, loop, mode):
    """The target's first task (the spin) is one jank of its wait, as long
    as its own clock says, sampled from its early mark, and begun where the
    mode says; then the sleep is seen as usual."""
    spin, sleep = target.wait_tasks(2, timeout=20)[:2]
    assert spin["kind"] == "spin" and sleep["kind"] == "sleep"
    janks = {}
    for t in (spin, sleep):
        j = jb.wait_for(lambda r: r.get("type") == "jank" and r["pid"] == target.pid
                        and abs(r["begin_monotonic_ns"] - t["begin_ns"]) < 20_000_000, timeout=10)
        assert j is not None, (f"{loop} ({mode}): no jank for the {t['kind']} task "
                               f"{t['begin_ns']}..{t['end_ns']}: {jb.of_type('jank', target.pid)}\n"
                               f"{jb.stderr[-2000:]}")
        assert j["wait_syscall"] == LOOPS[loop][0], j
        assert close_to_task(j["duration_ms"], t), (loop, mode, j["duration_ms"], t)
        janks[t["kind"]] = j
    first = janks["spin"]
    assert first["samples"] >= MIN_SAMPLES, (loop, mode, first["samples"])
    assert "busy_until" in first["heaviest_stack"], first["heaviest_stack"]
    # Begun at the switch-in only where the wait's return was hidden.
    assert first.get("begin_at_switch_in", False) is (mode == "hidden-return"), first
    assert "begin_at_switch_in" not in janks["sleep"], janks["sleep"]


@pytest.mark.parametrize("mode", list(MODES))
def test_first_task_after_attach_of_a_thread_idle_in_each_wait(mode, tmp_path):
    """Every event-loop wait of this arch, a target idle in each; one
    jankbpf --pid ... for all, started after them."""
    loops = list(LOOPS)
    targets = idle_targets(loops)
    try:
        args = [a for t in targets for a in ("--pid", str(t.pid))]
        jb = Jankbpf(*args, "--ignore-startup-time", IGNORE, "--log-dir", str(tmp_path), "-v",
                     env=env_for(mode))
        if mode == "hidden-return":
            assert f"{len(targets)} threads asleep in a wait at attach" in jb.stderr, jb.stderr
        # One at a time, so no two tasks share the CPUs.
        for t, loop in zip(targets, loops):
            t.start_now()
            check_first_task(jb, t, loop, mode)
        assert jb.stop() == 0, jb.stderr
    finally:
        for t in targets:
            t.kill()
    s = jb.of_type("summary")[0]
    assert ("task_iter" in s["features_missing"]) is False, s["features_missing"]


@pytest.mark.parametrize("scope", ["comm", "system-wide"])
def test_first_task_after_attach_by_name_and_system_wide(scope, tmp_path):
    """The same for a process watched by --comm, and system-wide: the
    attach-time walk applies the same rules as the hooks (--comm's name,
    main threads only) to every thread on the machine."""
    name = f"jt-idle-{os.getpid() % 10000}"
    (target,) = idle_targets(["epoll"] if "epoll" in LOOPS else ["epoll_pwait"], name=name)
    loop = "epoll" if "epoll" in LOOPS else "epoll_pwait"
    try:
        args = ["--comm", name] if scope == "comm" else []
        jb = Jankbpf(*args, "--ignore-startup-time", IGNORE, "--log-dir", str(tmp_path),
                     env=env_for("hidden-return"))
        target.start_now()
        check_first_task(jb, target, loop, "hidden-return")
        assert jb.stop() == 0, jb.stderr
    finally:
        target.kill()


def test_a_wakeup_the_wait_sleeps_through_begins_no_task(tmp_path):
    """A thread found asleep in its wait is woken without leaving it: a
    SIGSTOP wakes it, the wait gives way to the stop, and SIGCONT restarts
    it. The task begun at the switch-in is undone at the stop, when its
    registers show it still inside that wait (same syscall, same pc); else
    the whole stopped second would end up in a false jank. Then its real
    first task is still seen."""
    loop = "poll" if "poll" in LOOPS else "ppoll"
    (target,) = idle_targets([loop])
    try:
        jb = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE, "--log-dir",
                     str(tmp_path), env=env_for("hidden-return"))
        os.kill(target.pid, signal.SIGSTOP)
        time.sleep(1.0)
        os.kill(target.pid, signal.SIGCONT)
        # poll comes back as restart_syscall from the same instruction.
        target.wait_asleep_in(LOOPS[loop][1], RESTART_SYSCALL)
        time.sleep(0.3)
        assert not jb.of_type("jank", target.pid), jb.of_type("jank", target.pid)
        target.start_now()
        check_first_task(jb, target, loop, "hidden-return")
        assert jb.stop() == 0, jb.stderr
    finally:
        target.kill()
    early = [j for j in jb.of_type("jank", target.pid) if j["duration_ms"] > 900]
    assert not early, early


MARKER_LOOP = os.path.join(BUILD, "tests", "marker_loop")


@pytest.mark.parametrize("mode", list(MODES))
def test_first_marked_dispatch_after_attach(mode, tmp_path):
    """A marker-bounded loop (run_one and its uretprobe) idle in epoll_wait
    at attach: its first dispatch after the attach is a marker task of its
    own, whatever the wait's return showed."""
    proc = subprocess.Popen([MARKER_LOOP, "--start-on-signal", "--gap", "300", "slow:spin:300"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert '"ready"' in proc.stdout.readline()
        time.sleep(float(IGNORE) + 0.3)
        spec = f"{MARKER_LOOP}:run_one,{MARKER_LOOP}:run_one%return"
        jb = Jankbpf("--pid", str(proc.pid), "--ignore-startup-time", IGNORE, "--log-dir", str(tmp_path),
                     "--marker", spec, env=env_for(mode))
        proc.send_signal(signal.SIGUSR2)
        out, _ = proc.communicate(timeout=20)
        time.sleep(0.3)
        assert jb.stop() == 0, jb.stderr
    finally:
        proc.kill()
    (cb,) = [json.loads(l) for l in out.splitlines() if '"cb"' in l]
    (j,) = [r for r in jb.of_type("jank", proc.pid) if r["duration_ms"] > 250]
    assert j["boundary"] == "marker" and j["runnable_name"] == "run_one", j
    assert close_to_app(j["duration_ms"], cb["dur_ns"] / 1e6), (j["duration_ms"], cb)
