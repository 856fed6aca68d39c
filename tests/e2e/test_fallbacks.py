"""The fallbacks other kernels need, exercised on this one: JANKBPF_DISABLE
makes jankbpf treat a feature as missing, so the paths Debian 12's 6.1
takes (no bpf_task_from_pid: per-thread state and off-CPU stashes by tid)
and the scan watchdog are tested here too. The kernel lane (tests/kernels)
runs the real thing on 6.1."""
import os
import re

import pytest

from harness import BUILD, JANKBPF, run_jankbpf

STACK_LOOP = os.path.join(BUILD, "tests", "stack_loop")

# name -> (extra flags, environment, expected watchdog, expected state storage)
MODES = {
    "timer-hash": ([], {"JANKBPF_DISABLE": "bpf_task_from_pid"}, "timer", "hash"),
    "scan": (["--watchdog", "scan"], {}, "scan", "hash"),
}


def run(tmp_path, mode, *tasks, extra=()):
    flags, env, _, _ = MODES[mode]
    rc, records, err = run_jankbpf("--ignore-startup-time", "3", "--log-type", "1",
                                   "--log-dir", str(tmp_path), "--dev",
                                   "--report-times-per-app", "3", *flags, *extra,
                                   "--", STACK_LOOP, "3.3", *tasks, env=env)
    assert rc == 0, err
    return records, err


def names(heaviest):
    return [m.group(1) for m in re.finditer(r"\(([A-Za-z_][\w.]*?)(\+\d+)?\)\(", heaviest)]


@pytest.mark.parametrize("mode", MODES)
def test_cpu_task_is_seen_running_with_stacks(tmp_path, mode):
    records, err = run(tmp_path, mode, "deep:400")
    (j,) = [r for r in records if r["type"] == "jank"]
    assert j["seen_running"], j
    assert j["samples"] >= 15, j["samples"]
    order = names(j["heaviest_stack"])
    assert all(f in order for f in ("inner", "middle", "outer", "main")), order
    (s,) = [r for r in records if r["type"] == "summary"]
    assert s["watchdog"] == MODES[mode][2] and s["state_storage"] == MODES[mode][3], s
    # (Whether trampolines are missing depends on the kernel, not the mode.)
    missing = set(s["features_missing"]) - {"trampolines"}
    if mode == "timer-hash":
        assert missing == {"bpf_task_from_pid"}, s
        assert "bpf_task_from_pid not available" in err, err
    else:
        assert missing == set(), s


@pytest.mark.parametrize("mode", MODES)
def test_off_cpu_capture_and_waker(tmp_path, mode):
    records, _ = run(tmp_path, mode, "block:300")
    (j,) = [r for r in records if r["type"] == "jank"]
    assert j["off_cpu"], f"no off-CPU capture in {mode} mode"
    off = j["off_cpu"][0]
    assert any("pipe_read" in f for f in off["kernel_stack"]), off
    assert off["waker"]["comm"] == "jt-waker", off
    order = names(j["heaviest_stack"])
    assert "wait_for_pipe" in order and "main" in order, order


@pytest.mark.parametrize("mode", MODES)
def test_hang_of_a_stuck_task(tmp_path, mode):
    records, _ = run(tmp_path, mode, "deep:1500", extra=("--hang-threshold", "1000"))
    (h,) = [r for r in records if r["type"] == "hang"]
    assert 1000 <= h["duration_ms"] < 1100, h
    (j,) = [r for r in records if r["type"] == "jank"]
    assert j["task_seq"] == h["task_seq"] and j["seen_running"]


def test_without_perf_sampling_janks_still_come_and_the_summary_says_so(tmp_path):
    rc, records, err = run_jankbpf("--ignore-startup-time", "3", "--log-dir", str(tmp_path),
                                   "--", STACK_LOOP, "3.3", "deep:300",
                                   env={"JANKBPF_DISABLE": "perf_sampling"})
    assert rc == 0, err
    (j,) = [r for r in records if r["type"] == "jank"]
    assert j["seen_running"] and 290 <= j["duration_ms"] <= 320
    (s,) = [r for r in records if r["type"] == "summary"]
    assert set(s["features_missing"]) - {"trampolines"} == {"perf_sampling"}, s
    assert err.count("perf_sampling not available") == 1, err


def test_check_prints_the_feature_table(tmp_path):
    import subprocess
    p = subprocess.run([JANKBPF, "--check"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    for feature in ("bpf_task_from_pid", "bpf_timer", "task_storage", "offcpu_capture",
                    "perf_sampling", "uprobes", "trace_cmd", "trampolines"):
        assert re.search(rf"^{feature}\s+(yes|NO)\s+\S", p.stdout, re.M), p.stdout
    assert "jankbpf can run here." in p.stdout
    p = subprocess.run([JANKBPF, "--check"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "JANKBPF_DISABLE": "bpf_task_from_pid,offcpu_capture"})
    assert re.search(r"^bpf_task_from_pid\s+NO .*instead: per-thread state in a tid hash", p.stdout, re.M)
    assert re.search(r"^offcpu_capture\s+NO .*instead: no stacks of sleeping threads", p.stdout, re.M)


def test_dwarf_read_lazily_or_copied_whole_names_the_same_lines(tmp_path):
    """With userfaultfd (the default) a binary's DWARF is read page by page
    as stacks touch it; with it refused, copied whole. The heaviest stack's
    functions and their file:line are the same either way, and only the
    refused run lists lazy_dwarf as missing."""
    def frames(env, sub):
        d = tmp_path / sub
        d.mkdir()
        rc, records, err = run_jankbpf("--ignore-startup-time", "3", "--log-type", "1", "--log-dir", str(d),
                                       "--", STACK_LOOP, "3.3", "deep:400", env=env)
        assert rc == 0, err
        (j,) = [r for r in records if r["type"] == "jank"]
        (s,) = [r for r in records if r["type"] == "summary"]
        lines = [(f["symbol"], f.get("file", "")) for f in j["stack"] if f.get("symbol") in MINE]
        return lines, set(s["features_missing"]) - {"trampolines"}, err
    MINE = ("inner", "middle", "outer", "main")
    # inner's line is where its sample fell; its callers' are their call sites.
    strip = lambda lines: [(sym, f.rsplit(":", 1)[0] if sym == "inner" else f) for sym, f in lines]  # noqa: E731
    lazy, lazy_missing, _ = frames({}, "lazy")
    whole, whole_missing, err = frames({"JANKBPF_DISABLE": "lazy_dwarf"}, "whole")
    assert set(MINE) <= {sym for sym, _ in lazy}, lazy
    assert all(re.search(r"stack_loop\.c:\d+$", f) for _, f in lazy), lazy
    assert strip(lazy) == strip(whole), (lazy, whole)
    assert lazy_missing == set() and whole_missing == {"lazy_dwarf"}, (lazy_missing, whole_missing)
    assert "lazy_dwarf not available" in err, err
