"""bench/jankbench's pure parts, cheap enough for `make test`: RESULTS.md
and the terminal summary rendered from a fixture set of stored results
(fixtures/: real BENCH_QUICK data of some scenarios, stored text of
others, none for some), and the goal verdicts judged from them. Needs no
root and no build: nothing here can be skipped."""
import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from jankbench import goals, report, store  # noqa: E402
from jankbench.scenarios.fuzz import parse_table  # noqa: E402

FIXTURES = os.path.join(HERE, "fixtures")


def results():
    r = store.load(FIXTURES)
    assert r, f"no fixtures in {FIXTURES}"
    return r


def rows():
    return {r["id"]: r for r in goals.evaluate(results())}


def test_goal_met_from_data():
    r = rows()["attach-150ms"]
    assert r["state"] == "met" and r["verdict"] == "**met**", r
    assert re.match(r"median \d+ ms \(worst \d+ ms\)$", r["figure"]), r


def test_goal_not_met_from_data():
    r = rows()["attach-50ms"]
    assert r["state"] == "not met" and r["verdict"] == "**not met**", r


def test_goal_not_measured_without_data():
    assert "lane_tax" not in results()
    r = rows()["lane-tax"]
    assert r["state"] == "not measured" and r["figure"] == "—", r


def test_goal_rows_of_stored_text():
    """A section kept as text brings its goal rows as text."""
    assert "data" not in results()["fuzz"]
    r = rows()["fuzz"]
    assert r["state"] == "met" and r["figure"].startswith("9 targets"), r


def test_every_goal_has_a_row():
    got = goals.evaluate(results())
    assert [r["id"] for r in got] == [g.id for g in goals.GOALS]
    assert all(r["state"] in ("met", "not met", "reported", "not measured")
               or r["state"].startswith("met relative") for r in got), got


def test_markdown():
    res = results()
    md, term, _ = report.render(res)
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


def test_terminal_from_same_model():
    md, term, rows_ = report.render(results())
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
    md, _, _ = report.render(got)
    assert "on `quick-one` (BENCH_QUICK=1 smoke run)" in md


def test_save_has_no_nan(tmp_path):
    path = store.save(str(tmp_path), "x", {"a": float("nan"), "b": [1.5, math.inf]}, {"date": "d"})
    text = open(path).read()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["data"] == {"a": None, "b": [1.5, None]}


def test_fuzz_table():
    table = ("| target | executions | exec/s | crashes | corpus |\n|---|---:|---:|---:|---|\n"
             "| fuzz_maps | 100000 | 6439 | 0 | 418 files, 1054 KB |\n"
             "| fuzz_config | 2 | 0 | 1 | 3 files, 1 KB |\n")
    got = parse_table(table)
    assert got == [{"target": "fuzz_maps", "executions": 100000, "exec_per_s": 6439, "crashes": 0,
                    "corpus": "418 files, 1054 KB"},
                   {"target": "fuzz_config", "executions": 2, "exec_per_s": 0, "crashes": 1,
                    "corpus": "3 files, 1 KB"}]
    figure, ok = [g for g in goals.GOALS if g.id == "fuzz"][0].judge(
        {"rows": got, "runs": 100000, "rc": 1})
    assert not ok and "1 crashes" in figure


def test_hook_goal_gives_the_least_average_possible():
    """Task begins at the clock read's floor, every other run at the empty
    program's: (2 x 150 + 6 x 50) / 8 = 75 ns."""
    hooks = {"tools": {
        "jankbpf": {"per_prog": {"sys_exit_{epoll_wait,poll}": [2, 400], "sched_switch": [4, 400],
                                 "sys_enter_{epoll_wait,poll}": [2, 200]}},
        "bpftrace": {"per_prog": {"sys_enter_epoll_wait": [2, 600]}},
        "floor": {"per_prog": {"sched_switch": [10, 500], "sched_wakeup": [10, 1500]}}}}
    fig, _ = goals._hook_80(hooks)
    assert "each task's begin (2 runs)" in fig and fig.endswith(": 75 ns"), fig
    # Without the floor's runs, no bound is claimed.
    del hooks["tools"]["floor"]
    assert "least average" not in goals._hook_80(hooks)[0]
