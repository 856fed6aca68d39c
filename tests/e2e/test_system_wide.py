"""End-to-end tests of markers on a whole machine: a uprobe belongs to a
file, so a process that runs its own copy of a marked binary (a container's
image, a binary replaced on disk, a program exec'd later) is covered only
once jankbpf sees it map that file and attaches to it too."""
import json
import os
import shutil
import subprocess

import pytest

from harness import BUILD, Jankbpf, close_to_app

MARKER_LOOP = os.path.join(BUILD, "tests", "marker_loop")
IGNORE = "3"


@pytest.mark.parametrize("via_exec", [False, True], ids=["first-wait", "after-exec"])
def test_own_copy_of_a_marked_binary_in_a_mount_namespace_is_attached(tmp_path, via_exec):
    # Inside the namespace MARKER_LOOP's path holds a copy: the same path,
    # another file, which the probes attached at start do not cover.
    copy = tmp_path / "marker_loop.copy"
    shutil.copy(MARKER_LOOP, copy)
    spec = f"{MARKER_LOOP}:mloop:begin,{MARKER_LOOP}:mloop:end"
    jb = Jankbpf("--ignore-startup-time", IGNORE, "--log-type", "1", "--marker", spec, "-v")
    run = f"nice -n -20 {MARKER_LOOP} --start-delay 3.3 a:spin:5,slow:spin:300,b:spin:5"
    if via_exec:
        # First a program with no marked binary waits in select() (tracked,
        # nothing to attach), then it execs into the copy.
        argv = ["nice", "-n", "-20", MARKER_LOOP, "--start-delay", "3.3", "a:spin:5,slow:spin:300,b:spin:5"]
        run = ("exec /usr/bin/python3 -c 'import os, select, sys; select.select([], [], [], 0.3); "
               f"os.execvp(\"nice\", {json.dumps(argv)})'")
    script = (f"mount --bind {copy} {MARKER_LOOP} && "
              f"stat -c '{{\"inode\":%i}}' {MARKER_LOOP} && {run}")
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(l) for l in p.stdout.splitlines()]
    assert lines[0]["inode"] != os.stat(MARKER_LOOP).st_ino, "the copy is the same file"
    pid = next(l["pid"] for l in lines if l.get("ready"))
    (slow,) = [l for l in lines if l.get("cb") == "slow"]
    assert slow["sema"] > 0, "the copy's USDT semaphore was never raised"
    jb.wait_for(lambda r: r.get("type") == "jank" and r.get("pid") == pid, timeout=5)
    assert jb.stop() == 0, jb.stderr
    janks = jb.of_type("jank", pid)
    assert len(janks) == 1, [(j["duration_ms"], j["boundary"]) for j in janks]
    j = janks[0]
    assert j["boundary"] == "marker" and j["runnable_name"] == "slow"
    assert close_to_app(j["duration_ms"], slow["dur_ns"] / 1e6), j["duration_ms"]
    assert j["marker"]["binary"] == MARKER_LOOP  # as the process sees it
    assert "a file no probe covers" in jb.stderr
    # Begin and end on the host's file, then on the namespace's copy.
    assert jb.summary()["marker_sites"] == 4
