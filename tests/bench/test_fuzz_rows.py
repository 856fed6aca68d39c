"""The fuzz section's rows, target by target (bench/jankbench/fuzz_rows.py):
which stored row a run keeps, resumes or runs again, how a resumed row
adds up, and when rendering calls a row stale. Pure: no build, no root
(`make fuzz-srcs` only prints the Makefile's lists)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from jankbench import fuzz_rows, goals  # noqa: E402
from test_render import FakeGit  # noqa: E402  (pytest puts this folder on sys.path)

RUNS = 10_000_000


def row(t, execs=RUNS, sha="s1", rc=0, crashes=0, interrupted=0, **more):
    return {"target": t, "executions": execs, "exec_per_s": 1000, "seconds": execs / 1000, "crashes": crashes,
            "rc": rc, "interrupted": interrupted, "corpus_files": 1, "corpus_kb": 1, "build_id": "b",
            "sha256": sha, **more}


def test_a_row_is_kept_only_for_the_same_binary():
    prev = [row("fuzz_a"), row("fuzz_b", sha="old"), row("fuzz_c", execs=700_000, rc=72, interrupted=1),
            row("fuzz_d", crashes=1, rc=1, execs=5_000), row("fuzz_e", execs=100_000)]
    ids = {t: ("b", "s1") for t in ("fuzz_a", "fuzz_b", "fuzz_c", "fuzz_d", "fuzz_e", "fuzz_f")}
    p = fuzz_rows.plan(prev, ids, ["fuzz_a", "fuzz_b", "fuzz_c", "fuzz_d", "fuzz_e", "fuzz_f"], RUNS)
    assert p["fuzz_a"] == ("keep", prev[0], 0)
    # Another binary: its executions say nothing of this one.
    assert p["fuzz_b"] == ("run", None, RUNS)
    # Cut short (a signal, or a smaller run): the executions it still lacks.
    assert p["fuzz_c"] == ("resume", prev[2], RUNS - 700_000)
    assert p["fuzz_e"] == ("resume", prev[4], RUNS - 100_000)
    # A finding stays one until the binary changes: not run away from.
    assert p["fuzz_d"][0] == "keep"
    # Never ran, or not built now.
    assert p["fuzz_f"] == ("run", None, RUNS)
    assert fuzz_rows.plan(prev, {}, ["fuzz_a"], RUNS)["fuzz_a"] == ("run", None, RUNS)


def test_a_resumed_row_adds_its_runs_up():
    before = row("fuzz_c", execs=700_000, rc=72, interrupted=1)
    before["runs"] = [{"commit": "a" * 40, "date": "d1", "executions": 700_000, "seconds": 700.0, "rc": 72}]
    new = row("fuzz_c", execs=RUNS - 700_000)
    new["seconds"] = 9300.0
    r = fuzz_rows.merged(before, new, {"commit": "b" * 40, "date": "d2"})
    assert r["executions"] == RUNS and r["seconds"] == 10_000.0 and r["exec_per_s"] == 1000
    assert r["rc"] == 0 and not r["interrupted"]
    assert [x["commit"][0] for x in r["runs"]] == ["a", "b"] and r["runs"][1]["executions"] == RUNS - 700_000
    fig, ok = goals._fuzz({"targets": [r]}, targets=["fuzz_c"])
    assert ok, fig
    # A fresh run: one entry.
    assert len(fuzz_rows.merged(None, new, {"commit": "c" * 40, "date": "d3"})["runs"]) == 1


def test_a_row_is_stale_only_when_its_own_sources_change():
    r = row("fuzz_maps", sources=["src/stack/maps.cpp", "src/stack/maps.h", "tests/fuzz/fuzz_maps.cpp"],
            flags="clang++ -O2", checked={"commit": "1" * 40, "date": "d"})
    other = FakeGit(later=[("2222222 causes: x", "src/cause/why.cpp"), ("3333333 README", "README.md")])
    assert fuzz_rows.row_stale(r, other, "clang++ -O2") is None
    own = FakeGit(later=[("4444444 maps: y", "src/stack/maps.h")])
    assert "4444444 maps: y" in fuzz_rows.row_stale(r, own, "clang++ -O2")
    assert "uncommitted" in fuzz_rows.row_stale(r, FakeGit(dirty={"tests/fuzz/fuzz_maps.cpp": "x"}), "clang++ -O2")
    assert "other flags" in fuzz_rows.row_stale(r, FakeGit(), "clang++ -O1")
    assert "not in this checkout" in fuzz_rows.row_stale(r, FakeGit(ancestor=False), "clang++ -O2")
    # The section: the stale rows' reasons; False (the provenance decides)
    # while some row was stored without its sources.
    d = {"targets": [r, dict(r, target="fuzz_b")]}
    assert fuzz_rows.section_stale(d, other, "clang++ -O2") is None
    assert fuzz_rows.section_stale(d, own, "clang++ -O2").count("4444444") == 2
    assert fuzz_rows.section_stale({"targets": [r, row("fuzz_old")]}, own, "clang++ -O2") is False


def test_sources_come_from_the_dependency_files(tmp_path):
    out = tmp_path / "fuzz"
    (out / "harness").mkdir(parents=True)
    (out / "obj" / "stack").mkdir(parents=True)
    (out / "harness" / "fuzz_maps.d").write_text(
        "build/fuzz/harness/fuzz_maps.o: tests/fuzz/fuzz_maps.cpp \\\n  src/stack/maps.h /usr/include/x.h\n\n"
        "src/stack/maps.h:\n")
    (out / "obj" / "stack" / "maps.d").write_text(
        "build/fuzz/obj/stack/maps.o: src/stack/maps.cpp src/stack/maps.h \\\n  src/util/fd.h build/fuzz/gen.h\n")
    got = fuzz_rows.sources("fuzz_maps", ["stack/maps"], str(out), ROOT)
    assert got == sorted(["src/stack/maps.cpp", "src/stack/maps.h", "src/util/fd.h", "tests/fuzz/fuzz_maps.cpp",
                          *fuzz_rows.EXTRA_SOURCES]), got


def test_the_makefile_says_what_every_fuzz_target_is_built_from():
    layout, flags = fuzz_rows.make_layout(ROOT)
    assert sorted(layout) == sorted(goals.fuzz_targets(os.path.join(ROOT, "Makefile")))
    assert "stack/maps" in layout["fuzz_maps"][0] and "-fsanitize=address" in flags
    for objs, _ in layout.values():
        assert all(os.path.exists(os.path.join(ROOT, "src", o + ".cpp")) for o in objs), objs


def test_a_target_the_time_box_never_started_never_ran():
    rows = [row("fuzz_a"), row("fuzz_b", execs=0)]
    fig, ok = goals._fuzz({"targets": rows}, targets=["fuzz_a", "fuzz_b"])
    assert not ok and "1 of the Makefile's 2 targets ran" in fig and "never ran: fuzz_b" in fig, fig
    # One that failed before its first execution still shows as failed.
    rows[1] = row("fuzz_b", execs=0, rc=1, crashes=1)
    fig, ok = goals._fuzz({"targets": rows}, targets=["fuzz_a", "fuzz_b"])
    assert not ok and "failed: fuzz_b" in fig, fig


def test_a_run_cut_short_by_a_starved_timeout_is_resumed_and_says_so():
    """scripts/fuzz.sh's replay_timeouts: a timeout not reproduced alone
    leaves the row short (rc 0), resumed next time; its run says how many."""
    new = row("fuzz_c", execs=3_000_000, starved=1)
    r = fuzz_rows.merged(None, new, {"commit": "b" * 40, "date": "d2"})
    assert r["runs"][0]["starved"] == 1 and not fuzz_rows.failed(r)
    assert fuzz_rows.plan([{**r, "sha256": "s1"}], {"fuzz_c": ("b", "s1")}, ["fuzz_c"], RUNS)["fuzz_c"][0] == "resume"
    assert "starved" not in fuzz_rows.merged(None, row("fuzz_c"), {"commit": "b" * 40, "date": "d2"})["runs"][0]
