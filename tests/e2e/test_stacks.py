"""End-to-end tests of stacks: perf-sampled on-CPU stacks unwound with DWARF
from -O2 -fomit-frame-pointer binaries, off-CPU captures with their waker,
JIT frames from perf maps, the seed's stack log."""
import os
import re

import pytest

from harness import BUILD, Jankbpf, need, run_jankbpf
from target import Target, command as target_command
from sched_trace import SchedTrace

STACK_LOOP = os.path.join(BUILD, "tests", "stack_loop")
IGNORE = "3"


def janks_of(records):
    return [r for r in records if r.get("type") == "jank"]


def frame_names(heaviest):
    """Function names of the heaviest stack's lines, leaf first."""
    names = []
    for line in heaviest.splitlines():
        m = re.search(r"\(([^()+]+?)(\+\d+)?\)\(", line) or re.search(r" at (\S+) \(", line)
        names.append(m.group(1) if m else line)
    return names


def run_stack_loop(tmp_path, *tasks, extra=()):
    rc, records, err = run_jankbpf("--ignore-startup-time", IGNORE, "--log-type", "1",
                                   "--log-dir", str(tmp_path), "--dev",
                                   "--report-times-per-app", "3", *extra,
                                   "--", STACK_LOOP, "3.3", *tasks)
    assert rc == 0, err
    return janks_of(records)


def test_dwarf_unwinds_frame_pointerless_binary_to_main(tmp_path):
    (j,) = run_stack_loop(tmp_path, "deep:300")
    assert j["samples"] >= 15, j["samples"]
    names = frame_names(j["heaviest_stack"])
    # Leaf first: inner (or the spin it calls), then middle, outer, main.
    order = [names.index(f) for f in ("inner", "middle", "outer", "run_task", "main")]
    assert order == sorted(order), names
    # The structured stack says the same, with module indexes into `modules`.
    symbols = [f["symbol"] for f in j["stack"]]
    assert symbols.index("inner") < symbols.index("middle") < symbols.index("outer") < symbols.index("main")
    modules = j["modules"]
    mine = [i for i, (path, build_id) in enumerate(modules) if path.endswith("/stack_loop")]
    assert mine and len(modules[mine[0]][1]) == 40
    assert all(f["module_index"] < len(modules) for f in j["stack"])
    # The seed's stack log: one tree of the record's samples. A preemption
    # caught in the task weighs the sampling periods it lasted; the header
    # then says in how many periods the tree counts, and no frame counts
    # more than the tree's roots together.
    (log,) = j["external_log"]
    assert os.path.basename(log).startswith(f"stack-{j['pid']}-")
    text = open(log).read()
    m = re.search(r"^# jankbpf stack log: .* task of [\d.]+ ms, (\d+) samples(?:, counted in (\d+) sampling periods)?$",
                  text, re.M)
    assert m, text
    assert int(m.group(1)) == j["samples"]
    periods = int(m.group(2) or m.group(1))
    lines = [l for l in text.splitlines() if not l.startswith("#")]
    counts = [int(l.split()[0]) for l in lines]
    assert sum(int(l.split()[0]) for l in lines if not l.startswith(" ")) == periods, text
    assert max(counts) <= periods
    assert re.search(r"^\s*\d+ #\d\d pc [0-9a-f]{8} \S+/stack_loop\(inner\+\d+\)\([0-9a-f]{40}\)$",
                     text, re.M), text
    assert oct(os.stat(log).st_mode & 0o777) == "0o640"


def test_a_task_that_ran_while_jankbpf_waited_for_a_cpu_says_it_went_unsampled(tmp_path):
    # jankbpf and a SCHED_FIFO target share one CPU: the target's spins keep
    # jankbpf's event thread from turning the sampling clocks on at their
    # early mark, as a real-time app does to a jankbpf queued on its CPU on
    # a busy host. The record says how long its task ran unsampled, instead
    # of showing no samples for no reason; a sleep needs no clock.
    cpu = str(min(os.sched_getaffinity(0)))
    script = "spin:300,sleep:250,spin:400"
    rc, records, err = run_jankbpf("--ignore-startup-time", IGNORE, "--threshold", "150",
                                   "--", *target_command(script, start_delay=3.5, fifo=1),
                                   prefix=("taskset", "-c", cpu))
    assert rc == 0, err
    janks = janks_of(records)
    assert len(janks) == 3 and all(abs(j["duration_ms"] - ms) < 20 for j, ms in zip(janks, (300, 250, 400))), janks
    early, period = 50, 10
    for j in (janks[0], janks[2]):
        window = j["duration_ms"] - early  # within --sample-count x --sample-interval
        running = j["state_ms"]["running"]
        unsampled = j.get("unsampled_ms", 0)
        assert period < unsampled <= running, j
        # What the clocks were on for is what they sampled (a period either
        # side for the tick and for turning them on).
        assert abs(j["samples"] * period - (window - unsampled)) <= 3 * period, j
    assert "unsampled_ms" not in janks[1] and janks[1]["samples"] >= 1, janks[1]
    (summary,) = [r for r in records if r.get("type") == "summary"]
    assert summary["unsampled_tasks"] == 2
    assert err.count("ran with the sampling clocks still off") == 1, err


def test_stacks_cover_the_start_of_the_task(tmp_path):
    # 400 ms in phase_a, then 100 ms in phase_b: a sampler that starts at the
    # crossing would see only phase_b's share shrink to nothing.
    (j,) = run_stack_loop(tmp_path, "ab:400:100")
    text = open(j["external_log"][0]).read()

    def count(fn):
        m = re.search(r"^\s*(\d+) #\d\d pc \S+ \S+\(" + fn + r"\+", text, re.M)
        return int(m.group(1)) if m else 0

    a, b = count("phase_a"), count("phase_b")
    assert a > 0 and b > 0, text
    assert 2.0 <= a / b <= 8.0, (a, b)
    assert "phase_a" in j["heaviest_stack"]


def test_first_task_of_a_thread_asleep_at_attach_is_sampled_from_its_early_mark(tmp_path):
    # The target is already asleep in its wait when jankbpf starts, so the
    # thread is first seen at that wait's return, with no switch-in to arm
    # its watchdog. SCHED_FIFO on CPU 0: no preemption arms it by chance
    # (before the fix it did one run in four; the first task had 0 samples
    # the others). jankbpf on CPU 1, so its reader is never queued behind
    # the real-time target. 50..300 ms at one sample per 10 ms: 25 samples.
    need(len(os.sched_getaffinity(0)) >= 2, "needs 2 CPUs (the target and jankbpf apart)")
    mask = os.sched_getaffinity(0)
    with Target.start("spin:300,spin:300", start_delay=4, fifo=1) as target:
        os.sched_setaffinity(target.pid, {0})
        os.sched_setaffinity(0, {1})  # inherited by jankbpf and its threads
        try:
            jb = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE,
                         "--log-dir", str(tmp_path))
        finally:
            os.sched_setaffinity(0, mask)
        first = jb.wait_for(lambda r: r.get("type") == "jank" and r["task_seq"] == 1, timeout=20)
        assert jb.stop() == 0, jb.stderr
    assert first is not None, jb.stderr
    assert first["samples"] >= 20, first
    assert first["heaviest_stack"], first


def test_blocked_thread_has_kernel_stack_user_stack_and_waker(tmp_path):
    (j,) = run_stack_loop(tmp_path, "block:300")
    assert j["state_ms"]["sleeping"] > 280
    assert j["off_cpu"], "no off-CPU capture for a thread blocked 300 ms"
    off = j["off_cpu"][0]
    assert off["state"] == "sleeping"
    assert any("pipe_read" in f for f in off["kernel_stack"]), off["kernel_stack"]
    assert off["waker"]["comm"] == "jt-waker" and off["waker"]["in_interrupt"] is False
    assert off["waker"]["pid"] == j["pid"] and off["waker"]["tid"] != j["tid"]
    # The waker's own user stack (frame-pointer walk), symbolized in its
    # process: it was in write(2) on the pipe.
    ustack = off["waker"]["user_stack"]
    assert ustack and "write" in ustack[0] and "libc" in ustack[0], ustack
    assert 290 <= off["duration_ms"] <= 310
    names = frame_names(j["heaviest_stack"])
    assert "wait_for_pipe" in names and "main" in names
    assert names.index("wait_for_pipe") < names.index("main")
    # The blocked path is the heaviest: its capture weighs the 30 sampling
    # periods it slept; the thread ran for microseconds of the 300 ms.
    assert any("pipe_read" in n for n in names), (j["samples"], j["off_cpu"], names)
    assert "pipe_read" in open(j["external_log"][0]).read()


def test_a_long_sleep_outweighs_the_samples_of_a_shorter_spin(tmp_path):
    """The stack tree counts time: a task that spins 120 ms in phase_a and
    then sleeps 400 ms in wait_for_pipe is ~9 on-CPU samples (from 33 ms
    in, one per 10 ms) and one off-CPU capture, which weighs the 40
    sampling periods it slept. Its heaviest stack is the sleep, as its why
    line says; counted one stack each, it would be phase_a."""
    (j,) = run_stack_loop(tmp_path, "spinblock:120:400")
    names = frame_names(j["heaviest_stack"])
    assert "wait_for_pipe" in names and "phase_a" not in names, (j["samples"], names)
    assert any("pipe_read" in n for n in names), names
    assert [f["symbol"] for f in j["stack"] if f["symbol"] == "wait_for_pipe"], j["stack"]
    # The why line puts the sleep first, and says where the running time
    # went from the on-CPU samples alone, not from the heaviest (asleep) path.
    assert re.match(r"\d+ ms waiting in read on pipe:.*; 1\d\d ms running in spin_here \(stack_loop\.c:\d+\)$",
                    j["why"]), j["why"]
    # `samples` is the number of stacks; the log's header gives the periods.
    sleeps = [o for o in j["off_cpu"] if o["state"] == "sleeping" and o.get("duration_ms")]
    assert sleeps and 390 <= max(o["duration_ms"] for o in sleeps) <= 420, j["off_cpu"]
    assert 5 <= j["samples"] <= 20, j["samples"]
    head = open(j["external_log"][0]).readline()
    m = re.search(r", (\d+) samples, counted in (\d+) sampling periods$", head)
    assert m and int(m.group(1)) == j["samples"], head
    assert 40 + j["samples"] - 1 <= int(m.group(2)) <= 44 + j["samples"], head
    # phase_a's samples are in the log still.
    assert "phase_a" in open(j["external_log"][0]).read()


def test_long_sleep_right_after_a_short_one_is_captured(tmp_path):
    """One capture per sample period (10 ms) bounds the copies, but a
    capture of a stretch that ended at once gives its slot back: each 60 ms
    pipe wait that follows a 100 us nanosleep is captured, with its waker
    and length (a JVM's thread waiting for a GC after a lock's hand-off lost
    one wait in three to this)."""
    with SchedTrace(["stack_loop", "jt-waker"]) as trace:
        (j,) = run_stack_loop(tmp_path, "relay:4:60")
        # The four pipe waits by an independent account: the main thread's
        # sleeps of 20 ms or more (the waker writes 60 ms after it is told;
        # on a loaded machine later, CI once 92 ms).
        traced = [(hi - lo) / 1e6 for state, lo, hi in trace.stretches_of(j)
                  if state == "sleeping" and hi - lo >= 20_000_000]
    assert len(traced) == 4 and min(traced) >= 55, traced
    # The waits asleep: a preemption inside pipe_read on a loaded machine
    # is a runnable capture of its own (CI on 2010c4f had one, no length).
    # Each is captured with the length the trace gives it (off_cpu lists
    # the longest first).
    pipe = [o for o in j["off_cpu"] if o["state"] == "sleeping" and any("pipe_read" in f for f in o["kernel_stack"])]
    assert len(pipe) == 4, [(o["state"], o.get("duration_ms"), o["kernel_stack"][:4]) for o in j["off_cpu"]]
    assert all(o["waker"]["comm"] == "jt-waker" for o in pipe), pipe
    lengths = sorted(o["duration_ms"] for o in pipe)
    assert all(abs(a - b) <= 1.0 for a, b in zip(lengths, sorted(traced))), (lengths, traced)
    # No capture is given a length it did not have (a preempted one, or one
    # woken before its switch-out was traced, has none).
    assert sum(o.get("duration_ms") or 0 for o in j["off_cpu"]) <= j["state_ms"]["sleeping"] + j["state_ms"]["runnable"] + 1


def test_timer_wakeup_is_an_interrupt_without_a_user_stack(tmp_path):
    """A nanosleep ends in a timer interrupt: the task it lands on is no
    waker, and its user stack (that of whatever ran there) is not read."""
    with Target.start("sleep:300", start_delay=4) as target:
        jb = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE,
                     "--log-dir", str(tmp_path))
        target.wait_done(timeout=30)
        assert jb.stop() == 0, jb.stderr
    (j,) = jb.of_type("jank", target.pid)
    assert j["off_cpu"], j
    waker = j["off_cpu"][0]["waker"]
    assert waker["in_interrupt"] is True, waker
    assert waker["user_stack"] == [], waker
    assert any("hrtimer_wakeup" in f for f in waker["kernel_stack"]), waker


def test_node_js_function_named_from_perf_map(tmp_path):
    script = tmp_path / "busy.js"
    script.write_text(
        "function busyLoopForJank(ms) { const end = Date.now() + ms; let x = 0;\n"
        "  while (Date.now() < end) { x += Math.sqrt(x + 1); } return x; }\n"
        "setTimeout(() => { busyLoopForJank(300); }, 3300);\n"
        "setTimeout(() => { process.exit(0); }, 4300);\n")
    rc, records, err = run_jankbpf("--ignore-startup-time", IGNORE, "--log-type", "1",
                                   "--log-dir", str(tmp_path / "logs"), "--",
                                   "node", "--perf-basic-prof", "--interpreted-frames-native-stack",
                                   str(script))
    assert rc == 0, err
    janks = [j for j in janks_of(records) if j["duration_ms"] > 250]
    assert len(janks) == 1
    j = janks[0]
    assert "busyLoopForJank" in j["heaviest_stack"], j["heaviest_stack"]
    assert "busy.js" in j["heaviest_stack"]
    assert "uv_run" in j["heaviest_stack"]  # carried on through native frames to libuv


def test_stack_quota_per_hour_with_dev(tmp_path):
    # Four janks with four different stacks: three stack logs, then the quota.
    janks = run_stack_loop(tmp_path, "deep:200", "ab:300:60", "block:250", "ab:60:300")
    assert len(janks) == 4
    assert [len(j["external_log"]) for j in janks] == [1, 1, 1, 0]
    assert "suppressed" not in janks[0]
    assert janks[3]["suppressed"] == "stack_quota"
    assert janks[3]["heaviest_stack"], "a suppressed jank still carries its stack"
    assert len(os.listdir(tmp_path)) == 3


def test_same_stack_is_not_reported_twice(tmp_path):
    janks = run_stack_loop(tmp_path, "deep:200", "deep:250")
    assert len(janks[0]["external_log"]) == 1
    assert janks[1]["external_log"] == [] and janks[1]["suppressed"] == "duplicate_stack"
