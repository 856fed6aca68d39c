"""End-to-end tests of delivery_ms: the time from the wakeup that ended a
wait to the wait's return, i.e. how long an event sat ready while the main
thread waited for a CPU. jank_target's late:D step makes that D ms: it pins
itself and a SCHED_FIFO hog to one CPU, and the hog spins across the moment
the loop's timer fires, so the wakeup finds the CPU taken."""
import test_core
from harness import SPAN_MS, Jankbpf, close_to_app
from test_core import IGNORE, START_DELAY, THRESHOLD, Target, jank_by_begin
# Autouse: the state split checked against the test's own sched trace here too.
from test_core import sched_trace  # noqa: F401


def test_delivery_shows_starved_wakeups_and_is_near_zero_otherwise():
    script = "spin:200,late:120:200,sleep:200,late:250:180,spin:160"
    with Target.start(script, start_delay=START_DELAY) as target:
        jb = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE,
                     "--log-type", "1")
        target.wait_done(30)
        target.wait(10)
        assert jb.wait(15) == 0, jb.stderr
    janks = jb.of_type("jank")
    test_core.assert_matches_truth(janks, target)
    tasks = target.long_tasks(THRESHOLD)
    assert [t["kind"] for t in tasks] == ["spin", "late", "sleep", "late", "spin"]
    late = [t for t in tasks if t["kind"] == "late"]
    assert all(t["method"] == "fifo" for t in late), "the hog could not be SCHED_FIFO"
    for i, task in enumerate(tasks):
        (j,) = jank_by_begin(janks, task)
        if task["kind"] == "late":
            assert_delivery(j, task)
            # The starvation came before the task: it is not in the task,
            # but for what the hog took back after an early return (see
            # assert_delivery: the app's excess over jankbpf bounds it).
            rest_ms = max(0.0, task["delivery_ns"] / 1e6 - j["delivery_ms"])
            assert j["state_ms"]["runnable"] < 0.05 * j["duration_ms"] + rest_ms, (j["state_ms"], rest_ms)
        elif i > 0:
            # Woken by its timer, nice -20: delivered at once (tens of µs;
            # a few ms at most while other sessions load both CPUs).
            # (The first task's wait began before jankbpf attached: 0.)
            assert j["delivery_ms"] < 10.0, (task["kind"], j["delivery_ms"])
        assert j["delivery_ms"] >= 0


def test_hang_record_carries_delivery():
    with Target.start("late:200:160,stuck", start_delay=START_DELAY) as target:
        jb = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE,
                     "--hang-threshold", "1000", "--log-type", "1")
        target.wait_stuck(timeout=30)
        hang = jb.wait_for(lambda r: r.get("type") == "hang", timeout=5)
        assert hang is not None, jb.stderr
        # The stuck task's wait was ended by its timer on a free CPU.
        assert 0 <= hang["delivery_ms"] < 10.0
        target.release()
        target.wait(10)
        jb.wait(15)
    (late,) = [t for t in target.long_tasks(THRESHOLD) if t["kind"] == "late"]
    (j,) = jank_by_begin(jb.of_type("jank"), late)
    assert_delivery(j, late)


def assert_delivery(j, task):
    """A late task's delivery_ms against the sched trace's count of the
    same wait for a CPU, and against the app's own measure.

    The app's runs from the timer's expiry to its clock read after the wait
    returned, so a preemption between the return and the read widens it:
    it bounds the delivery from above only. (CI on e79d308: jankbpf 124.1
    ms, the app 200.0; how the wait returned inside the hog's 200 ms spin is
    not known: 40 runs beside a nice-19 compile here did not reproduce it,
    and a 600 ms hog here starved the loop to the end. The trace's account
    below will say next time.) The trace, stamped at the wakeup and at the
    switch-ins, counts the same queueing jankbpf does."""
    app_ms = task["delivery_ns"] / 1e6
    traced = test_core.SCHED.delivery_of(j) if test_core.SCHED is not None else None
    where = (task["arg"], f"jankbpf {j['delivery_ms']}", f"app {app_ms:.3f}", f"sched trace {traced}")
    print("late task's delivery:", *where)
    if traced is None:
        # A switch the trace missed: the app's measure is all there is.
        assert close_to_app(j["delivery_ms"], app_ms), where
        return
    # Microseconds apart at the wakeup and at each switch-in.
    assert abs(j["delivery_ms"] - traced) <= 1.0 + 0.005 * traced, where
    assert j["delivery_ms"] <= app_ms + SPAN_MS, where
