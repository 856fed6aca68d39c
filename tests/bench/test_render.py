"""bench/jankbench's pure parts, cheap enough for `make test`: RESULTS.md
and the terminal summary rendered from a fixture set of stored results
(fixtures/: real BENCH_QUICK data of some scenarios, stored text of
others, none for some), the goal verdicts judged from them, the builds a
result is fresh or stale against, a full run's refusal of a dirty tree, and
which goals fail a run. Needs no root and no build: nothing here can be
skipped. (The git cases run git on a repository of their own in tmp_path.)"""
import json
import math
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from jankbench import __main__ as bench_main  # noqa: E402
from jankbench import builds, goals, report, store  # noqa: E402

FIXTURES = os.path.join(HERE, "fixtures")


def fresh(name, entry):
    """Every stored entry measures the code as it is (no git asked)."""
    return None


def results():
    r = store.load(FIXTURES)
    assert r, f"no fixtures in {FIXTURES}"
    return r


def rows(res=None, stale=fresh):
    return {r["id"]: r for r in goals.evaluate(res or results(), stale=stale)}


def goal(gid):
    return next(g for g in goals.GOALS if g.id == gid)


# ---- verdicts ---------------------------------------------------------------

def test_goal_met_from_data():
    r = rows()["attach-150ms"]
    assert r["state"] == "met" and r["verdict"] == "**met**", r
    assert re.match(r"median \d+ ms \(worst \d+ ms\)$", r["figure"]), r


def test_goal_not_met_from_data():
    r = rows()["attach-50ms"]
    assert r["state"] == "not met" and r["verdict"] == "**not met**", r


def test_stop_goal_judged_from_the_stored_stops_beside_the_peers():
    r = rows()["stop-200ms"]  # the fixture's stops: 716-816 ms
    assert r["state"] == "not met", r
    assert re.match(r"jankbpf median 768 ms \[715–816\]; in the same run bpftrace 1167 ms \[1117–1217\]; "
                    r"BCC 1016 ms \[915–1066\]$", r["figure"]), r


def test_goal_not_measured_without_data():
    assert "lane_tax" not in results()
    r = rows()["lane-tax"]
    assert r["state"] == "not measured" and r["figure"] == "—", r


def test_stored_text_is_never_a_verdict():
    """A section kept as text carries no verdict, even one typed into it."""
    res = results()
    res["soak"] = {"scenario": "soak", "provenance": {"date": "d", "commit": "abc", "how": "by hand"},
                   "markdown": "30 minutes, all met", "goal_rows": {"soak-rss": {"figure": "+0.5 MB", "verdict": "met"}}}
    r = rows(res)
    assert all(r[g]["state"] == "not measured" for g in ("soak-rss", "soak-lost", "soak-arrive", "soak-exit")), r


def test_every_goal_has_a_row_and_no_qualified_state():
    got = goals.evaluate(results(), stale=fresh)
    assert [r["id"] for r in got] == [g.id for g in goals.GOALS]
    assert all(r["state"] in goals.STATES for r in got), [r["state"] for r in got]
    assert not any("relative" in r["figure"] or "reference" in r["figure"] for r in got)


def test_a_qualified_verdict_from_a_judge_is_an_error():
    g = goals.Goal("x", "x ≤ 1", "5", ("tax",), lambda d: ("1.5", "met relative to something"))
    (r,) = goals.evaluate(results(), goals=[g], stale=fresh)
    assert r["state"] == "error" and r["verdict"] == "**error**", r


def test_a_judge_that_raises_is_an_error_not_a_pass():
    def broken(d):
        return f"{d['no such figure']}", True
    g = goals.Goal("x", "x ≤ 1", "5", ("tax",), broken, fails_bench=True)
    (r,) = goals.evaluate(results(), goals=[g], stale=fresh)
    assert r["state"] == "error" and "KeyError" in r["figure"], r
    # ... and for a fails_bench goal measured in this run, the bench fails.
    assert bench_main.failed_goals([r], ["tax"], full=False) == [r]
    # Not measured in this run (its data is older): shown, not failing.
    assert bench_main.failed_goals([r], ["hooks"], full=False) == []


def test_unhealthy_data_is_an_error():
    lane = {"kernel": "k", "health": "soft lockup on CPU#1",
            "kinds": {"trampoline": {"before": 100, "during": 101, "after": 100}}}
    res = {"lane_tax": {"scenario": "lane_tax", "provenance": {}, "data": lane}}
    r = rows(res)["lane-tax"]
    assert r["state"] == "error" and "soft lockup" in r["figure"], r
    lane["health"] = "ok"
    assert rows(res)["lane-tax"]["state"] == "met"
    # A scenario that could not run stores its error: an error row too.
    res = {"node": {"scenario": "node", "provenance": {}, "data": {"error": "node not installed"}}}
    assert rows(res)["node-js-named"]["state"] == "error"


def test_lane_without_trampoline_figures_is_an_error():
    lane = {"kernel": "k", "health": "ok", "kinds": {"tracepoint": {"before": 100, "during": 150, "after": 100}}}
    r = rows({"lane_tax": {"scenario": "lane_tax", "provenance": {}, "data": lane}})["lane-tax"]
    assert r["state"] == "error", r


HOOKS = {"tools": {
    "jankbpf": {"per_prog": {"sys_exit_{epoll_wait,poll}": [2, 400], "sched_switch": [4, 400],
                             "sys_enter_{epoll_wait,poll}": [2, 200]}},
    "jankbpf-nostacks": {"per_prog": {"sched_switch": [4, 300]}},
    "bpftrace": {"per_prog": {"sys_enter_epoll_wait": [2, 600]}},
    "floor": {"per_prog": {"sched_switch": [10, 500], "sched_wakeup": [10, 1500]}}}}


def hooks_with(jankbpf_ns, bpftrace_ns):
    h = json.loads(json.dumps(HOOKS))
    h["tools"]["jankbpf"]["per_prog"] = {"sched_switch": [10, 10 * jankbpf_ns]}
    h["tools"]["bpftrace"]["per_prog"] = {"sys_enter_epoll_wait": [10, 10 * bpftrace_ns]}
    return h


def test_a_two_part_goal_is_met_only_when_both_parts_hold():
    judge = goal("hook-80ns").judge
    assert judge(hooks_with(70, 200))[1] is True
    assert judge(hooks_with(128, 352))[1] is False   # ≤ 0.5× bpftrace, but not ≤ 80 ns
    assert judge(hooks_with(70, 100))[1] is False    # ≤ 80 ns, but not ≤ 0.5× bpftrace


def test_hook_150_is_judged_in_ns_with_no_rescaled_machine():
    fig, ok = goal("hook-150ns").judge(hooks_with(160, 400))
    assert ok is False and "275" not in fig and "reference" not in fig, fig
    assert goal("hook-150ns").judge(hooks_with(140, 100))[1] is True


def test_hook_goal_gives_the_least_average_of_jankbpfs_own_mix():
    """Task begins at the clock read's floor, every other run at the empty
    program's: (2 x 150 + 6 x 50) / 8 = 75 ns. It is a bound for jankbpf's
    mix of hooks, and says so."""
    fig, _ = goals._hook_80(json.loads(json.dumps(HOOKS)))
    assert "jankbpf's own mix of hooks" in fig and "any tool" not in fig, fig
    assert "its task begins (2 runs)" in fig and fig.endswith(": 75 ns"), fig
    assert "an empty program measures 50 ns" in fig and "a clock read 150 ns" in fig, fig
    # Without the floor's runs, no bound is claimed.
    h = json.loads(json.dumps(HOOKS))
    del h["tools"]["floor"]
    assert "least average" not in goals._hook_80(h)[0]


def test_redis_goal_is_its_stated_bound_only():
    """≥ 99 % of baseline: the BPF share is context, not a hidden second bound."""
    thr = {"workloads": [{"name": "redis SET", "kind": "redis"}],
           "data": {c: {"redis SET": [{"rate": r, "cpu_us": 1.0}]}
                    for c, r in (("none", 100.0), ("jankbpf", 99.5), ("jankbpf-nostacks", 99.6))}}
    hooks = {"tools": {"jankbpf": {"per_workload": {"redis SET": {"ns_per_req": 500, "cpu_us": 1.0,
                                                                  "client_us": 1.0}}}}}
    fig, ok = goal("redis-99").judge(thr, hooks)
    assert ok is True and "25.0%" in fig, fig


# ---- fuzz and soak: from stored data only -------------------------------------

def fuzz_data(targets, executions=10_000_000, crashes=0):
    return {"runs": executions, "rc": 1 if crashes else 0, "clang": "14", "cpus": 2,
            "targets": [{"target": t, "executions": executions, "exec_per_s": 1000, "seconds": 1.0,
                         "crashes": crashes, "rc": 1 if crashes else 0, "corpus_files": 1, "corpus_kb": 1,
                         "build_id": "ab"} for t in targets]}


def test_fuzz_goal_covers_every_target_of_the_makefile():
    want = goals.fuzz_targets(os.path.join(ROOT, "Makefile"))
    assert "fuzz_v8_frames" in want and "fuzz_kernel_funcs" in want and len(want) >= 11
    fig, ok = goals._fuzz(fuzz_data(want), targets=want)
    assert ok is True, fig
    fig, ok = goals._fuzz(fuzz_data(want[:-1]), targets=want)
    assert ok is False and f"never ran: {want[-1]}" in fig, fig
    fig, ok = goals._fuzz(fuzz_data(want, executions=9_999_999), targets=want)
    assert ok is False and "under 10,000,000" in fig, fig
    fig, ok = goals._fuzz(fuzz_data(want, crashes=1), targets=want)
    assert ok is False and f"{len(want)} crashes" in fig, fig


def test_a_fuzz_target_stopped_by_a_signal_is_short_not_a_crash():
    want = ["fuzz_a", "fuzz_b", "fuzz_c"]
    d = fuzz_data(want)
    # fuzz_b as fuzz.sh records it now; fuzz_c as it did before it knew
    # libFuzzer's exit 72 (a crash counted for a run without an artifact).
    d["targets"][1].update(executions=700_000, rc=72, interrupted=1, crashes=0)
    d["targets"][2].update(executions=300_000, rc=72, crashes=1)
    fig, ok = goals._fuzz(d, targets=want)
    assert ok is False and "0 crashes" in fig and "failed" not in fig, fig
    assert "1 to 10,000,000 executions" in fig and "stopped before their executions were done: fuzz_b, fuzz_c" in fig
    assert "fuzz_b (700,000)" in fig, fig
    # A real failure stays one.
    d["targets"][0].update(crashes=1, rc=1)
    fig, ok = goals._fuzz(d, targets=want)
    assert "1 crashes" in fig and "failed: fuzz_a" in fig, fig


def test_fuzz_goal_reads_the_makefile(monkeypatch):
    monkeypatch.setattr(goals, "fuzz_targets", lambda makefile=None: ["fuzz_a", "fuzz_b"])
    res = {"fuzz": {"scenario": "fuzz", "provenance": {}, "data": fuzz_data(["fuzz_a"])}}
    r = rows(res)["fuzz"]
    assert r["state"] == "not met" and "never ran: fuzz_b" in r["figure"], r
    res["fuzz"]["data"] = fuzz_data(["fuzz_a", "fuzz_b"])
    assert rows(res)["fuzz"]["state"] == "met"


def test_fuzz_fixture_is_judged_from_its_rows(monkeypatch):
    """The fixture is a BENCH_QUICK run: every target of its day's Makefile,
    20,000 executions each. Targets added since are judged by
    test_fuzz_goal_reads_the_makefile; here the Makefile is the fixture's."""
    ran = [t["target"] for t in results()["fuzz"]["data"]["targets"]]
    monkeypatch.setattr(goals, "fuzz_targets", lambda makefile=None: ran)
    r = rows()["fuzz"]
    assert r["state"] == "not met" and "under 10,000,000: fuzz_maps" in r["figure"], r
    assert "never ran" not in r["figure"], r


def test_soak_goals_hold_for_a_30_minute_soak_only():
    m = dict(results()["soak"]["data"])
    assert m["minutes"] < 30
    for gid in ("soak-rss", "soak-lost", "soak-arrive", "soak-exit"):
        fig, ok = goal(gid).judge(m)
        assert ok is False and "the goal's is 30" in fig, (gid, fig)
    m = {**m, "minutes": 30.1, "janks": m["expected"], "rc": 0}
    assert goal("soak-arrive").judge(m)[1] is True


def _cause_row(cause, named=True, ms=300.0):
    exp = {"kind": "lock", "tid": 7, "comm": "holder"}
    got = dict(exp) if named else {**exp, "comm": "someone"}
    return {"cause": cause, "truth_ms": 300.0, "expected": exp, "got": got, "ms": ms, "why": ""}


def test_causes_goal_wants_95_percent_of_20_trials_with_identity_and_time():
    rows = [_cause_row("lock") for _ in range(20)] + [_cause_row("peer") for _ in range(20)]
    assert goal("causes-named").judge({"rows": rows, "kernel": "k"})[1] is True
    # 2 of 20 with the wrong owner, or the time 11 % off: 90 %, not met.
    for bad in (_cause_row("peer", named=False), _cause_row("peer", ms=333.0)):
        fig, ok = goal("causes-named").judge({"rows": rows[:38] + [bad, bad], "kernel": "k"})
        assert ok is False and "peer 18/20" in fig, fig
    with pytest.raises(ValueError):  # fewer than 20 trials is no verdict
        goal("causes-named").judge({"rows": rows[:19], "kernel": "k"})
    lane = {"arches": {"x86": {"rows": rows, "health": "ok", "hooks": "trampoline"},
                       "arm64": {"rows": rows, "health": "timeout", "hooks": "tracepoint"}}}
    with pytest.raises(ValueError):  # an unhealthy guest is no verdict
        goal("lane-causes-named").judge(lane)


def test_lane_causes_goal_wants_each_once_a_boot_cause_named():
    rows = [_cause_row(c) for c in ("lock", "peer") for _ in range(20)]
    once = [_cause_row(c) for c in ("fsync", "fault", "mmap_lock")]

    def lane(x86_once, arm_once=once):
        return {"arches": {"x86": {"rows": rows + x86_once, "health": "ok", "hooks": "trampoline"},
                           "arm64": {"rows": rows + arm_once, "health": "ok", "hooks": "tracepoint"}}}
    assert goal("lane-causes-named").judge(lane(once))[1] is True
    # The fault's slice 21 % short once (seen on the x86_64 lane under TCG).
    short = once[:1] + [_cause_row("fault", ms=237.0)] + once[2:]
    fig, ok = goal("lane-causes-named").judge(lane(short))
    assert ok is False and "fault NOT named" in fig, fig
    # One not planted at all is not met either.
    assert goal("lane-causes-named").judge(lane(once[:2]))[1] is False


def test_lane_fault_truth_is_the_guests_sched_trace_when_whole():
    from jankbench.scenarios import lane
    # Thread 7: a 10 ms jank from t=1 s; blocked 1.002-1.004 and 1.005-1.008 s.
    text = "\n".join([
        " 0.900000: sched_switch: prev_pid=0 prev_state=R next_pid=7",
        " 1.002000: sched_switch: prev_pid=7 prev_state=D next_pid=0",
        " 1.004000: sched_wakeup: pid=7",
        " 1.004010: sched_switch: prev_pid=0 prev_state=R next_pid=7",
        " 1.005000: sched_switch: prev_pid=7 prev_state=D next_pid=0",
        " 1.008000: sched_wakeup: pid=7",
        " 1.008020: sched_switch: prev_pid=0 prev_state=R next_pid=7",
        "overrun: 0"])
    jank = {"begin_monotonic_ns": 1_000_000_000, "duration_ms": 10.0}
    row = {"truth_ms": 6.5, "slack_ms": 0.02}
    lane._fault_truth_from_trace(row, text, 7, jank)
    assert row["truth_source"] == "sched trace" and row["app_ms"] == 6.5
    assert abs(row["truth_ms"] - 5.0) < 1e-9 and row["slack_ms"] == 0.02
    # Events lost, or a switch the trace missed: the app's measure stays.
    for bad in (text.replace("overrun: 0", "overrun: 3"),
                text.replace(" 1.004010: sched_switch: prev_pid=0 prev_state=R next_pid=7\n", "")):
        row = {"truth_ms": 6.5}
        lane._fault_truth_from_trace(row, bad, 7, jank)
        assert row["truth_ms"] == 6.5 and row["truth_source"].startswith("app"), row


def _curve_size(n, idle_ns, rss_kb, maps, janks=10, lost=None):
    w = {"secs": 10, "asked": 10, "janks": janks, "jankbpf_cpu_ns": 0, "bpf_ns": 0}
    return {"processes": n, "idle": {"secs": 10, "asked": 0, "janks": 0, "jankbpf_cpu_ns": idle_ns, "bpf_ns": 0},
            "rates": {"10": w}, "rss_kb": rss_kb, "map_bytes": maps, "lost": lost or {}}


def test_cost_curve_goal_is_linear_or_flat_and_complete():
    good = {"sizes": [_curve_size(1000, 10**8, 36000, 13 << 20), _curve_size(10000, 5 * 10**8, 40000, 13 << 20)]}
    assert goal("cost-curve").judge(good)[1] is True
    worse = {"sizes": [good["sizes"][0], _curve_size(10000, 2 * 10**9, 40000, 13 << 20)]}  # idle 20x for 10x
    assert goal("cost-curve").judge(worse)[1] is False
    missed = {"sizes": [good["sizes"][0], _curve_size(10000, 10**8, 36000, 13 << 20, janks=9)]}
    assert goal("cost-curve").judge(missed)[1] is False
    dropped = {"sizes": [good["sizes"][0], _curve_size(10000, 10**8, 36000, 13 << 20, lost={"threads_untracked": 3})]}
    assert goal("cost-curve").judge(dropped)[1] is False


# ---- builds: stale and dirty ---------------------------------------------------

class FakeGit:
    def __init__(self, later=(), ancestor=True, dirty=None):
        self.later, self.ancestor, self.dirty = list(later), ancestor, dirty or {}

    def is_ancestor(self, commit, of="HEAD"):
        return self.ancestor

    def commits_since(self, commit, paths):
        return [c for c, p in self.later if builds.under(p, paths)]

    def dirty_files(self):
        return dict(self.dirty)


PROV = {"commit": "1111111", "commit_full": "1111111" + "0" * 33, "describe": "1111111",
        "dirty": False, "dirty_files": {}, "build": {"jankbpf_version": "jankbpf 1111111"}}


def test_fresh_when_nothing_measured_changed():
    git = FakeGit(later=[("2222222 README", "README.md"), ("3333333 a test", "tests/e2e/x.py")])
    assert builds.stale_reason(PROV, builds.PRODUCT, git) is None


def test_stale_after_a_commit_to_the_code_it_measures():
    git = FakeGit(later=[("2222222 hooks: faster", "bpf/jank.bpf.c")])
    why = builds.stale_reason(PROV, builds.PRODUCT, git)
    assert why and "2222222 hooks: faster" in why, why
    # The fuzzers measure their harnesses too.
    git = FakeGit(later=[("4444444 harness", "tests/fuzz/fuzz_maps.cpp")])
    assert builds.stale_reason(PROV, builds.PRODUCT, git) is None
    assert builds.stale_reason(PROV, builds.code_of("fuzz"), git)


def test_stale_when_not_in_the_history():
    assert "not in this checkout's history" in builds.stale_reason(PROV, builds.PRODUCT, FakeGit(ancestor=False))


def test_a_dirty_build_is_fresh_only_against_the_same_changes():
    prov = {**PROV, "describe": "1111111-dirty", "dirty": True, "dirty_files": {"src/a.cpp": "blob1"}}
    assert builds.stale_reason(prov, builds.PRODUCT, FakeGit(dirty={"src/a.cpp": "blob1"})) is None
    assert builds.stale_reason(prov, builds.PRODUCT, FakeGit(dirty={"src/a.cpp": "blob2"}))
    assert builds.stale_reason(prov, builds.PRODUCT, FakeGit())  # changes committed or gone since
    # Uncommitted changes now, to code a clean build did not have.
    assert builds.stale_reason(PROV, builds.PRODUCT, FakeGit(dirty={"bpf/jank.bpf.c": "b"}))
    assert builds.stale_reason(PROV, builds.PRODUCT, FakeGit(dirty={"README.md": "b"})) is None


def test_results_stored_before_builds_were_recorded():
    old = {"commit": "1111111", "describe": "1111111", "machine": {"jankbpf": "jankbpf 1111111"}}
    assert builds.stale_reason(old, builds.PRODUCT, FakeGit()) is None  # make bench built that clean commit
    other = {**old, "machine": {"jankbpf": "jankbpf 0000000"}}
    assert "the binary it measured was jankbpf 0000000" in builds.stale_reason(other, builds.PRODUCT, FakeGit())
    dirty = {**old, "describe": "1111111-dirty"}
    assert "dirty tree" in builds.stale_reason(dirty, builds.PRODUCT, FakeGit())
    assert "not recorded" in builds.stale_reason({"commit": "1111111", "describe": "1111111"},
                                                 builds.PRODUCT, FakeGit())


def test_a_stale_section_keeps_its_figure_and_is_not_judged():
    def stale(name, entry):
        return "3 later commits change src" if name == "startup" else None
    r = rows(stale=stale)["attach-150ms"]
    assert r["state"] == "stale" and r["verdict"] == "**stale**", r
    assert r["figure"].startswith("median ") and "3 later commits change src" in r["figure"], r
    md, _, _ = report.render(results(), stale=stale)
    section = md.split("## 3. Startup: exec → attached\n", 1)[1].split("\n## ", 1)[0]
    assert "**Stale**: 3 later commits change src" in section
    assert "startup (stale)" in md.split("## Goals")[0]


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout


def repo_of(tmp_path, files):
    """A git repository in tmp_path whose first commit ("one") holds files."""
    repo = tmp_path / "repo"
    for f in files:
        (repo / f).parent.mkdir(parents=True, exist_ok=True)
        (repo / f).write_text("1\n")
    git(repo.parent, "init", "-q", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    return repo


def test_dirty_files_of_a_real_checkout_leave_the_bench_outputs_out(tmp_path):
    repo = repo_of(tmp_path, ("src/a.cpp", "bench/results/x.json", "bench/RESULTS.md", "README.md"))
    g = builds.Git(str(repo))
    assert g.dirty_files() == {}
    (repo / "bench" / "results" / "x.json").write_text("2\n")
    (repo / "bench" / "RESULTS.md").write_text("2\n")
    assert g.dirty_files() == {}, "the bench's own outputs are not code"
    (repo / "src" / "a.cpp").write_text("2\n")
    (repo / "src" / "new.cpp").write_text("3\n")  # untracked: the Makefile builds it too
    (repo / "README.md").unlink()
    d = g.dirty_files()
    assert set(d) == {"src/a.cpp", "src/new.cpp", "README.md"} and d["README.md"] == "deleted", d
    assert d["src/a.cpp"] == git(repo, "hash-object", "src/a.cpp").strip()
    t = builds.tree(g)
    assert t["dirty"] and t["describe"].endswith("-dirty") and len(t["commit_full"]) == 40, t
    assert "src/new.cpp" in builds.refuse_dirty(t)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two")
    assert not builds.tree(g)["dirty"] and builds.refuse_dirty(builds.tree(g)) is None
    assert [l.split()[1] for l in g.commits_since(t["commit_full"], ["src"])] == ["two"]
    assert g.commits_since(t["commit_full"], ["docs"]) == []


def test_a_full_run_refuses_a_dirty_tree(monkeypatch):
    dirty = {"dirty": True, "dirty_files": {"src/a.cpp": "b"}}
    monkeypatch.setattr(bench_main.config, "QUICK", False)
    why = bench_main.preflight("", "", dirty)
    assert why and "src/a.cpp" in why and "BENCH_ONLY" in why, why
    assert bench_main.preflight("", "", {"dirty": False, "dirty_files": {}}) is None
    # Some scenarios measure a dirty tree, recorded as dirty.
    assert bench_main.preflight("tax", "", dirty) is None
    assert bench_main.preflight("", "fuzz,soak", dirty) is None
    monkeypatch.setattr(bench_main.config, "QUICK", True)
    assert bench_main.preflight("", "", dirty) is None


def test_which_goals_fail_a_run(monkeypatch):
    monkeypatch.setattr(bench_main.config, "QUICK", False)
    row = lambda state, needs=("fuzz",), fails=True: {"state": state, "needs": list(needs), "fails_bench": fails,  # noqa: E731
                                                      "goal": "g", "figure": "f"}
    not_met, not_measured, error = row("not met"), row("not measured"), row("error")
    assert bench_main.failed_goals([not_met, error], ["fuzz"], full=False) == [not_met, error]
    assert bench_main.failed_goals([not_met], ["tax"], full=False) == []  # not measured in this run
    assert bench_main.failed_goals([row("not met", fails=False)], ["fuzz"], full=False) == []
    # A full run: every fails_bench goal must be met.
    assert bench_main.failed_goals([not_measured, row("stale")], [], full=True) == [not_measured, row("stale")]
    # A smoke run is below the goals' sizes by design: only its errors fail.
    monkeypatch.setattr(bench_main.config, "QUICK", True)
    assert bench_main.failed_goals([not_met, error], ["fuzz"], full=False) == [error]


# ---- rendering -----------------------------------------------------------------

def test_markdown():
    res = results()
    md, term, _ = report.render(res, stale=fresh)
    assert md.startswith("# jankbpf benchmark results\n")
    heads = re.findall(r"^## (.*)$", md, re.M)
    assert heads[:2] == ["Runs", "Goals"] and heads[-1] == "Notes", heads
    for name, title, _ in report.SECTIONS:
        if name in res:
            want = res[name].get("title") or title
            assert want in heads, (name, heads)
            # The measured line right under each section's heading.
            after = md.split(f"## {want}\n", 1)[1].lstrip("\n")
            assert after.startswith("_Measured "), after[:200]
    for name, e in res.items():
        if "data" in e:
            p = e["provenance"]
            assert f"on `{p['describe']}`" in md and p["date"] in md
        else:
            assert e["markdown"].strip() in md  # stored text kept as it is
    goal_lines = [l for l in md.split("## Goals\n")[1].split("\n## ")[0].splitlines() if l.startswith("| ")]
    assert len(goal_lines) == 2 + len(goals.GOALS)
    assert not re.search(r"\bnan\b", md, re.I), re.search(r".{80}\bnan\b.{20}", md, re.I)
    assert "| --- |" in md
    # The fuzz section: a row per target, with the build-id of the binary that ran.
    for fz in res["fuzz"]["data"]["targets"]:
        assert re.search(rf"\| {fz['target']} \| {fz['executions']:,} \| .* \| {fz['build_id'][:16]} \|", md), fz


def test_terminal_from_same_model():
    md, term, rows_ = report.render(results(), stale=fresh)
    assert "# Goals" in term and "[not measured]" in term and "[met]" in term and "[not met]" in term
    assert "**" not in term and "`" not in term
    assert "## 6. Syscall tax on an unwatched process" in term


def test_quick_results_laid_over(tmp_path):
    """A later directory (the quick runs') wins over the committed one."""
    quick = tmp_path / "quick"
    e = dict(results()["tax"])
    e["provenance"] = {**e["provenance"], "describe": "quick-one", "quick": True}
    store.save(str(quick), "tax", e["data"], e["provenance"])
    got = store.load(FIXTURES, str(quick))
    assert got["tax"]["provenance"]["describe"] == "quick-one"
    md, _, _ = report.render(got, stale=fresh)
    assert "on `quick-one`" in md and "(BENCH_QUICK=1 smoke run)" in md


def test_save_has_no_nan(tmp_path):
    path = store.save(str(tmp_path), "x", {"a": float("nan"), "b": [1.5, math.inf]}, {"date": "d"})
    text = open(path).read()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["data"] == {"a": None, "b": [1.5, None]}


def test_committed_results_render_and_say_what_they_are():
    """bench/results/ as committed: every goal row in a plain state, and no
    verdict is typed into stored text (soak and fuzz come from data only)."""
    res = store.load(os.path.join(ROOT, "bench", "results"))
    for name in ("fuzz", "soak"):
        assert name not in res or "data" in res[name], f"bench/results/{name}.json is text, not data"
    assert not any("goal_rows" in e for e in res.values())
    got = goals.evaluate(res, stale=fresh)
    assert all(r["state"] in goals.STATES for r in got)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_lane_cause_loops_judged_each():
    """Issue 27 item 5: each taxbench loop with the trampolines ≤ 1.05×; one
    over fails the goal, and a lane run without them is an error."""
    def lane(futex_during):
        loop = lambda d: {"before": 100, "during": d, "after": 100, "rounds": [{}]}  # noqa: E731
        return {"kernel": "k", "health": "ok", "kinds": {"trampoline": {
            "before": 100, "during": 101, "after": 100,
            "loops": {"fault": loop(102), "futex": loop(futex_during), "blockio": loop(100)}}}}
    res = lambda d: {"lane_tax": {"scenario": "lane_tax", "provenance": {}, "data": d}}  # noqa: E731
    assert rows(res(lane(104)))["lane-tax-causes"]["state"] == "met"
    r = rows(res(lane(110)))["lane-tax-causes"]
    assert r["state"] != "met" and "futex 1.100×" in r["figure"], r
    old = lane(100)
    del old["kinds"]["trampoline"]["loops"]
    assert rows(res(old))["lane-tax-causes"]["state"] == "error"


def test_lane_tax_stats_say_where_the_tax_goes():
    """The stats attach: bpftool's run counts and times before and after a
    loop become runs and BPF ns per operation, and the section sets them
    beside the measured tax (the rest: the kernel's dispatch)."""
    from jankbench.scenarios import lane as lane_scn
    before = ("7: tracing  name jb_switch_btf  tag 01  gpl run_time_ns 1000 run_cnt 10\n"
              "8: tracing  name jb_waking_btf  tag 02  gpl run_time_ns 500 run_cnt 5\n")
    after = ("7: tracing  name jb_switch_btf  tag 01  gpl run_time_ns 501000 run_cnt 5010\n"
             "8: tracing  name jb_waking_btf  tag 02  gpl run_time_ns 250500 run_cnt 5005\n"
             "9: tracing  name jb_wakeup_btf  tag 03  gpl run_time_ns 0 run_cnt 0\n")
    files = {"target-stats-futex-before": before, "target-stats-futex-after": after}
    st = lane_scn._stats(lambda item: files.get(item, ""))
    assert list(st) == ["futex"]
    f = st["futex"]
    assert f["programs"]["jb_switch_btf"] == {"runs_per_op": 1.0, "ns_per_op": 100.0}
    assert f["programs"]["jb_waking_btf"] == {"runs_per_op": 1.0, "ns_per_op": 50.0}
    assert "jb_wakeup_btf" not in f["programs"]  # did not run
    assert f["runs_per_op"] == 2.0 and f["ns_per_op"] == 150.0
    loop = {"before": 6000, "during": 6800, "after": 6000, "rounds": [{}]}
    data = {"kernel": "k", "health": "ok", "kinds": {"trampoline": {
        "before": 100, "during": 101, "after": 100, "hooks_used": "trampoline",
        "loops": {"futex": loop}, "stats": st}}}
    md, _, _ = report.render({"lane_tax": {"scenario": "lane_tax", "provenance": {}, "data": data}}, stale=fresh)
    row = next(l for l in md.splitlines() if l.startswith("| trampoline | futex | 2.00"))
    assert "| 75 | 800 | 400 |" in row, row  # 150 ns in 2 runs; 800 ns of tax over 2 runs


# ---- section 1b: perf samples into buckets ------------------------------------

PERF_LINES = """\
    redis-server  4242/4242  100.500000:  ffffffffc0a1b2c3 bpf_prog_6deef7357e7b4530_jank_switch ([kernel.kallsyms])
    redis-server  4242/4242  100.500250:  ffffffff811c0a10 bpf_trace_run2 ([kernel.kallsyms])
    redis-server  4242/4242  100.500500:  ffffffff811c0b20 __bpf_trace_sched_switch ([kernel.kallsyms])
    redis-server  4242/4242  100.500750:  ffffffff8100c1d0 syscall_exit_work ([kernel.kallsyms])
    redis-server  4242/4242  100.501000:  ffffffff811d0000 htab_map_lookup_elem ([kernel.kallsyms])
    redis-server  4242/4243  100.501250:  ffffffff81b0c000 __schedule ([kernel.kallsyms])
    redis-server  4242/4242  100.501300:  ffffffff81b0c100 finish_task_switch.isra.0 ([kernel.kallsyms])
    redis-server  4242/4242  100.501350:  ffffffff81030000 read_tsc ([kernel.kallsyms])
    redis-server  4242/4242  100.501400:  ffffffff81250000 trace_event_buffer_reserve ([kernel.kallsyms])
    redis-server  4242/4242  100.501500:  ffffffff81700000 tcp_sendmsg ([kernel.kallsyms])
    redis-server  4242/4242  100.501750:      55d0c0de0000 dictFind (/usr/bin/redis-server)
    redis-server  4242/4242  100.502000:      55d0c0de0000 operator()(int) const (/usr/bin/redis-server)
 jankbpf ring  777/779  100.502250:      7f0000000000 jankbpf::Detector::poll (/usr/sbin/jankbpf)
 redis-benchmark  5000/5000  100.502500:  ffffffff81700000 tcp_recvmsg ([kernel.kallsyms])
         swapper     0/0     100.502750:  ffffffff81c00000 default_idle ([kernel.kallsyms])
    redis-server  4242/4242  99.000000:      55d0c0de0000 dictFind (/usr/bin/redis-server)
            cron  600/600  100.503000:      7f0000000000 [unknown] ([unknown])
"""


def test_perf_samples_are_bucketed_by_who_and_what_ran():
    import importlib
    where = importlib.import_module("jankbench.scenarios.where")  # the package re-exports its function
    samples = list(where.parse_samples(PERF_LINES))
    assert len(samples) == 17
    assert samples[11][2] == "operator()(int) const" and samples[11][3] == "/usr/bin/redis-server"
    assert samples[12][0] == 777 and samples[12][4] == "jankbpf ring"  # a comm with a space
    b = where.bucket(samples, (100.0, 101.0), {4242}, 777)
    assert b == {"BPF programs": 1, "tracepoint and BPF dispatch": 2,
                 "syscall slow path (entry and exit work)": 1, "BPF helpers and maps": 1,
                 "scheduler (switches, wakeups)": 1, "other kernel": 1, "clock reads": 1,
                 "interrupts-off sections (switch and wakeup hooks run in them)": 1,
                 "ftrace event recording (a trace instance's buffer)": 1,
                 "user space (the server's own code)": 2, "the tool's own threads": 1,
                 "the client (redis-benchmark)": 1, "other processes": 1}, b
    # Idle and samples outside the workload's window count nowhere.
    assert sum(b.values()) == 15


def test_runs_say_whether_they_measured_the_code_as_it_is():
    res = results()
    measured = [n for n, _, _ in report.SECTIONS if res.get(n) and "markdown" not in res[n]]
    assert len(measured) >= 2
    line = report.code_line(res, fresh)
    assert line.startswith(f"{len(measured)} of {len(measured)} measured sections") and "stale" not in line
    one = measured[0]
    line = report.code_line(res, lambda n, e: "a later commit" if n == one else None)
    assert line.startswith(f"{len(measured) - 1} of {len(measured)}") and line.endswith(f"stale: {one}."), line
    # None fresh: no empty list of commits.
    line = report.code_line(res, lambda n, e: "a later commit")
    assert line.startswith(f"0 of {len(measured)}") and "commit(s)" not in line, line


def test_a_run_of_some_scenarios_is_not_called_a_full_run():
    base = {"quick": False}
    assert report._run_kind({**base, "command": "make bench FUZZ_BENCH_MINUTES=28 FUZZ_JOBS=2"}) == "full run"
    for cmd in ("make bench BENCH_ONLY=fuzz FUZZ_BENCH_MINUTES=75", "make bench BENCH_SKIP=soak",
                "python3 -m jankbench --only tax,hooks"):
        assert report._run_kind({**base, "command": cmd}) == "selected scenarios", cmd
    assert report._run_kind({"quick": True, "command": "make bench BENCH_QUICK=1"}) == "BENCH_QUICK=1 smoke run"
    assert report._run_kind({"how": "by hand", "command": "make bench BENCH_ONLY=x"}) == "by hand"


def test_report_code_is_not_what_the_runtime_scenarios_measure(tmp_path):
    """`jankbpf report` and the --report sinks run in no scenario but the
    fuzzers: a change there leaves the others fresh, and stales the fuzz."""
    repo = repo_of(tmp_path, ("src/a.cpp", "src/report/r.cpp"))
    g = builds.Git(str(repo))
    prov = dict(PROV, commit_full=g.head(), commit=g.head()[:7],
                build={"jankbpf_version": f"jankbpf {g.head()[:7]}"})
    (repo / "src" / "report" / "r.cpp").write_text("2\n")
    assert builds.stale_reason(prov, builds.code_of("throughput"), g) is None  # uncommitted, not measured
    assert builds.stale_reason(prov, builds.code_of("fuzz"), g)
    git(repo, "commit", "-qam", "a report fix")
    assert builds.stale_reason(prov, builds.code_of("throughput"), g) is None
    why = builds.stale_reason(prov, builds.code_of("fuzz"), g)
    assert why and "a report fix" in why, why
    (repo / "src" / "a.cpp").write_text("2\n")
    git(repo, "commit", "-qam", "a product change")
    why = builds.stale_reason(prov, builds.code_of("throughput"), g)
    assert why and "1 later commit changes src, bpf, include (not src/report)" in why, why


def test_where_the_throughput_goes_is_reported_from_its_samples():
    r = rows()["where"]
    assert r["state"] == "reported", r
    assert re.search(r"redis SET: jankbpf [+-]\d+\.\d\d µs/request \(most in .+\), bpftrace [+-]\d+\.\d\d", r["figure"]), r
    md, _, _ = report.render(results(), stale=fresh)
    sec = md.split("## 1b.")[1].split("\n## ")[0]
    assert "**ping-pong**, µs per request" in sec and "| **server, all** |" in sec, sec[:2000]
    assert "The server's functions whose samples grew most under jankbpf" in sec


def _with_stacks(**jankbpf):
    res = results()
    st = json.loads(json.dumps(res["stacks"]))
    st["data"]["jankbpf"].update(jankbpf)
    res = dict(res)
    res["stacks"] = st
    return res


def test_unwind_goal_counts_sampling_periods_not_samples():
    # The tree counts periods (an off-CPU capture weighs those it slept):
    # 5 samples counted in 12 periods, all 12 reaching main, is met ...
    r = rows(_with_stacks(log_samples=5, log_periods=12, to_main=12))["unwind-main"]
    assert r["state"] == "met" and "12 of 12 logged sampling periods (5 samples)" in r["figure"], r
    # ... and 5 of 12 periods is not, though 5 equals the samples.
    r = rows(_with_stacks(log_samples=5, log_periods=12, to_main=5))["unwind-main"]
    assert r["state"] == "not met", r
    # Data of a run that stored no periods, more of them than samples: no verdict.
    r = rows(_with_stacks(log_samples=5, to_main=12))["unwind-main"]
    assert r["state"] == "error" and "log_periods" in r["figure"], r


def test_stack_log_share_reads_the_headers_periods(tmp_path):
    from jankbench.scenarios.stacks import is_main_frame, stack_log_share
    log = tmp_path / "stack-1-2.txt"
    log.write_text("# jankbpf stack log: pid 1 tid 1 (t) task of 300 ms, 3 samples, counted in 31 sampling periods\n"
                   "31 #00 pc 0000000000001000 /bin/t (main+16)(0)\n"
                   " 30 #01 pc 0000000000001100 /bin/t (sleepy+4)(0)\n"
                   " 1 #01 pc 0000000000001200 /bin/t (spin+8)(0)\n"
                   "2 #00 pc 0000000000002000 /bin/t (orphan+1)(0)\n")
    assert stack_log_share(str(log), is_main_frame) == {
        "samples": 3, "periods": 31, "reach": 31, "bytes": len(log.read_text())}


def test_a_scenario_booting_the_arm64_lane_builds_the_arm64_tree(monkeypatch):
    # lane_causes boots build/arm64's jankbpf: the bench builds it from the
    # tree too (it once measured whatever an earlier build had left there).
    monkeypatch.setattr(os, "uname", lambda: os.uname_result(("Linux", "h", "6.18", "#1", "x86_64")))
    assert builds.arm64_goals(["lane_causes"]) == ["ARCH=arm64", "all", "apps"]
    assert builds.arm64_goals(["causes", "lane_tax"]) == []
    monkeypatch.setattr(os, "uname", lambda: os.uname_result(("Linux", "h", "6.18", "#1", "aarch64")))
    assert builds.arm64_goals(["lane_causes"]) == []


def test_curve_counts_cpu_per_thread_and_program_never_negative():
    from jankbench.procs import grown
    # Program 2 closed in between (its 9,000 ns gone from the later read),
    # program 3 loaded: 1 ran 300 ns more, 3 ran 40 ns.
    before = {1: {"run_time_ns": 500}, 2: {"run_time_ns": 9_000}}
    after = {1: {"run_time_ns": 800}, 3: {"run_time_ns": 40}}
    assert grown(before, after, "run_time_ns") == 340
    # A thread that exited (22 ms gone), one that ran 5 ms more.
    assert grown({10: 7_000_000, 11: 22_000_000}, {10: 12_000_000}) == 5_000_000
