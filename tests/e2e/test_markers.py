"""End-to-end tests of --marker: tasks bounded by a program's own dispatch
marks (uprobes, uretprobes, USDT probes) against tests/apps/marker_loop,
whose ground truth names every callback it ran."""
import json
import os
import subprocess
import time

import pytest

from harness import BUILD, Jankbpf, close_to_app, held_bpf_ids, run_jankbpf, still_loaded

MARKER_LOOP = os.path.join(BUILD, "tests", "marker_loop")
IGNORE = "3"
# At nice -20 the targets keep their CPU while other sessions load the
# machine (the same reason as test_core's NICE).
NICE = ["nice", "-n", "-20"]
# Rounds: one wakeup each. Syscall boundaries would see a whole round as one
# task; markers see each callback.
ROUNDS = [
    "a:spin:5,slow:spin:300,b:spin:5",   # one slow callback among fast ones
    "n:nest:300",                        # nested dispatch and a nested wait inside
    "c:spin:100,d:spin:100",             # a 200 ms wakeup of two 100 ms callbacks
    "e:spin:10,f:bare:200",              # 200 ms of work after a dispatch ended
    "g:sleep:250",                       # a callback asleep
    "h:bare:220",                        # a wakeup with no marks at all
]

FORMS = {
    "uprobe": ("{b}:mark_begin,{b}:mark_end", "uprobe", "mark_begin"),
    "uretprobe": ("{b}:run_one,{b}:run_one%return", "uprobe", "run_one"),
    "usdt": ("{b}:mloop:begin,{b}:mloop:end", "usdt", "mloop:begin"),
}


class Truth:
    def __init__(self, lines):
        self.cbs = {}
        self.rounds = {}
        for line in lines:
            rec = json.loads(line)
            if "cb" in rec:
                self.cbs[rec["cb"]] = rec
            elif "round" in rec:
                self.rounds[rec["round"]] = rec


def run_loop(*rounds, start_delay=3.3):
    p = subprocess.run([*NICE, MARKER_LOOP, "--start-delay", str(start_delay), *rounds],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return Truth(p.stdout.splitlines())


def one_by_begin(janks, begin_ns):
    found = [j for j in janks if abs(j["begin_monotonic_ns"] - begin_ns) < 1_000_000]
    assert len(found) == 1, (begin_ns, [(j["begin_monotonic_ns"], j["duration_ms"]) for j in janks])
    return found[0]


@pytest.mark.parametrize("form", list(FORMS))
def test_marked_dispatches_are_the_tasks(form):
    spec, kind, probe = FORMS[form]
    jb = Jankbpf("--comm", "marker_loop", "--ignore-startup-time", IGNORE, "--log-type", "1",
                 "--marker", spec.format(b=MARKER_LOOP))
    progs, links = held_bpf_ids(jb.proc.pid)
    truth = run_loop(*ROUNDS)
    time.sleep(0.3)
    assert jb.stop() == 0, jb.stderr
    janks = jb.of_type("jank")

    def check(j, true_ns, boundary):
        assert j["boundary"] == boundary, j
        assert close_to_app(j["duration_ms"], true_ns / 1e6), (j["duration_ms"], true_ns / 1e6)
        assert abs(sum(j["state_ms"].values()) - j["duration_ms"]) < 0.01

    # The slow callback alone, not its wakeup's 310 ms.
    slow = one_by_begin(janks, truth.cbs["slow"]["begin_ns"])
    check(slow, truth.cbs["slow"]["dur_ns"], "marker")
    on_cpu = slow["state_ms"]["running"] + slow["state_ms"]["runnable"]
    assert on_cpu > 0.95 * slow["duration_ms"], slow["state_ms"]
    # The nested dispatch and the nested loop's wait are inside the outer task.
    nest = one_by_begin(janks, truth.cbs["n"]["begin_ns"])
    check(nest, truth.cbs["n"]["dur_ns"], "marker")
    assert nest["state_ms"]["sleeping"] > 50, nest["state_ms"]  # the nested wait
    # After a dispatch ends, the wait rule holds again: unmarked work up to
    # the next wait is a task of its own.
    e_end = truth.cbs["e"]["end_ns"]
    after = one_by_begin(janks, e_end)
    check(after, truth.rounds[4]["end_ns"] - e_end, "after_marker")
    assert "runnable_name" not in after and "marker" not in after
    sleeper = one_by_begin(janks, truth.cbs["g"]["begin_ns"])
    check(sleeper, truth.cbs["g"]["dur_ns"], "marker")
    assert sleeper["state_ms"]["sleeping"] > 240
    # A wakeup that reaches no marker is bounded by the waits, as ever.
    bare = one_by_begin(janks, truth.rounds[6]["begin_ns"])
    check(bare, truth.rounds[6]["dur_ns"], "syscall")
    # Two 100 ms callbacks are two short tasks; nothing else was reported.
    assert len(janks) == 5, [(j["duration_ms"], j["boundary"]) for j in janks]

    for j, cb in ((slow, "slow"), (nest, "n"), (sleeper, "g")):
        marker = j["marker"]
        assert marker["type"] == kind and marker["probe"] == probe
        assert marker["binary"] == os.path.realpath(MARKER_LOOP)
        # USDT passes the callback's name; a uprobe is named by its symbol.
        assert j["runnable_name"] == (cb if form == "usdt" else probe)
    if form == "usdt":
        # The semaphore was raised for every process while attached...
        assert all(cb["sema"] > 0 for cb in truth.cbs.values())
    # ...and nothing is left behind.
    assert len(links) >= 2
    _, left_links = still_loaded(progs, links)
    assert not left_links, "marker links left after exit"
    if form == "usdt":
        after_run = run_loop("x:spin:1", start_delay=0)
        assert after_run.cbs["x"]["sema"] == 0


def test_markers_are_filtered_in_the_kernel_by_pid():
    spec = "{b}:mloop:begin,{b}:mloop:end".format(b=MARKER_LOOP)
    rounds = ["a:spin:200"]
    other = subprocess.Popen([*NICE, MARKER_LOOP, "--start-delay", "3.3", *rounds],
                             stdout=subprocess.PIPE, text=True)
    watched = subprocess.Popen([*NICE, MARKER_LOOP, "--start-delay", "3.3", *rounds],
                               stdout=subprocess.PIPE, text=True)
    try:
        jb = Jankbpf("--pid", str(watched.pid), "--ignore-startup-time", IGNORE,
                     "--log-type", "1", "--marker", spec)
        assert watched.wait(30) == 0 and other.wait(30) == 0
        assert jb.wait(15) == 0, jb.stderr  # the only --pid target exited
    finally:
        other.kill()
        watched.kill()
    janks = jb.of_type("jank")
    assert [(j["pid"], j["boundary"], j["runnable_name"]) for j in janks] == \
        [(watched.pid, "marker", "a")]


@pytest.mark.parametrize("spec,needle", [
    ("/nonexistent/app:f,/nonexistent/app:g", "no such file"),
    ("{b}:no_such_function,{b}:mark_end", "no function 'no_such_function'"),
    ("{b}:mloop:nope,{b}:mloop:end", "no USDT probe mloop:nope"),
    ("{b}:mark_begin", "BEGIN_SPEC,END_SPEC"),
    ("{b}:mark_begin,{b}:mark_begin", "both the begin and the end"),
    ("{b}:a:b:c,{b}:mark_end", "is not BINARY:SYMBOL"),
    ("no-such-binary-anywhere:f,no-such-binary-anywhere:g", "not found in PATH"),
])
def test_bad_markers_exit_2_and_say_what(spec, needle):
    rc, records, err = run_jankbpf("--marker", spec.format(b=MARKER_LOOP), "--duration", "1")
    assert rc == 2, err
    assert needle in err and "--marker" in err
    assert records == []
