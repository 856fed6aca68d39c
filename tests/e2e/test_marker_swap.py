"""End-to-end test of the marker-file race (issue 10, H3): a watched
process's marked binary is planned, and before its probes are attached
(the window widened by JANKBPF_TEST_MARKER_ATTACH_DELAY_MS, a test-only
seam) its path is swapped for a symlink to another file. The probes must
land in the file parsed -- the one the process runs -- and nowhere else."""
import json
import os
import shutil
import subprocess
import time

from harness import BUILD, Jankbpf

MARKER_LOOP = os.path.join(BUILD, "tests", "marker_loop")
IGNORE = "3"
ROUND = "a:spin:5,slow:spin:300,b:spin:5"
# The target lives on (20 short rounds, 200 ms apart) while the other file runs.
TAIL = ["x:spin:1"] * 20
DELAY_MS = 2500


def test_swapped_path_cannot_redirect_a_planned_marker(tmp_path, monkeypatch):
    marked = str(tmp_path / "marker_loop")
    other = str(tmp_path / "other_loop")
    shutil.copy(MARKER_LOOP, marked)
    shutil.copy(MARKER_LOOP, other)
    spec = f"{marked}:mark_begin,{marked}:mark_end"
    monkeypatch.setenv("JANKBPF_TEST_MARKER_ATTACH_DELAY_MS", str(DELAY_MS))
    jb = Jankbpf("--ignore-startup-time", IGNORE, "--log-type", "1", "--marker", spec, "-v")
    # The path now holds a new copy (a binary replaced on disk): a file the
    # probes attached at start do not cover, planned when its process waits.
    shutil.copy(MARKER_LOOP, marked + ".new")
    os.rename(marked + ".new", marked)
    target_ino = os.stat(marked).st_ino
    target = subprocess.Popen(["nice", "-n", "-20", marked, "--start-delay", "5", ROUND, *TAIL],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while "test: attaching" not in jb.stderr:
        assert time.monotonic() < deadline, jb.stderr
        time.sleep(0.02)
    # Inside the window: the name becomes a symlink to another file.
    window_open = time.monotonic()
    os.rename(marked, marked + ".orig")
    os.symlink(other, marked)
    time.sleep(max(0.0, DELAY_MS / 1000 + 0.5 - (time.monotonic() - window_open)))
    assert target.poll() is None, "the target ended before its probes were attached"
    # The other file runs while the target's probes are attached: had they
    # followed the symlink, its callbacks would be marker-bounded tasks.
    p = subprocess.run(["nice", "-n", "-20", other, "--start-delay", "3.3", ROUND],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert target.poll() is None, "the target ended before the other file's slow round"
    other_pid = next(json.loads(l)["pid"] for l in p.stdout.splitlines() if "ready" in l)
    out, err = target.communicate(timeout=60)
    assert target.returncode == 0, err
    lines = [json.loads(l) for l in out.splitlines()]
    pid = next(l["pid"] for l in lines if l.get("ready"))
    (slow,) = [l for l in lines if l.get("cb") == "slow"]
    jb.wait_for(lambda r: r.get("type") == "jank" and r.get("pid") == pid, timeout=5)
    jb.wait_for(lambda r: r.get("type") == "jank" and r.get("pid") == other_pid, timeout=5)
    jb.wait_for(lambda r: False, timeout=1)  # the target's exit: its sites released
    assert jb.stop() == 0, jb.stderr
    janks = jb.of_type("jank", pid)
    assert len(janks) == 1, [(j["duration_ms"], j["boundary"]) for j in janks]
    j = janks[0]
    assert j["boundary"] == "marker" and j["runnable_name"] == "mark_begin", j  # a uprobe: its symbol
    assert abs(j["duration_ms"] - slow["dur_ns"] / 1e6) < 20, j["duration_ms"]
    assert os.stat(marked + ".orig").st_ino == target_ino
    other_janks = jb.of_type("jank", other_pid)
    assert other_janks, "the other file's slow round was not seen at all"
    assert all(j["boundary"] != "marker" for j in other_janks), other_janks
    s = jb.summary()
    # The start's two sites and the target's two, released when it exited.
    assert s["marker_sites"] == 4, s
    assert s["marker_sites_released"] == 2, s
    assert "marker_files_refused" not in s and "marker_files_capped" not in s, s
