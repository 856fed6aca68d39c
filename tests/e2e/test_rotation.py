"""Log rotation: the shipped logrotate snippet, run for real against a
jankbpf writing --output while janks arrive, loses and duplicates nothing.

The snippet renames the file, creates a new one and sends SIGHUP; jankbpf
writes each line wholly to the old file or the new one. Every record in
every rotated file (gzipped ones too) is counted against the target's own
ground truth and the summary.
"""
import gzip
import json
import os
import shutil
import subprocess
import time

import pytest

from harness import ROOT, Jankbpf
import target as target_mod

SNIPPET = os.path.join(ROOT, "debian", "jankbpf.logrotate")
THRESHOLD = 20
TASKS = 150


def logrotate_or_skip():
    path = shutil.which("logrotate") or ("/usr/sbin/logrotate" if os.path.exists("/usr/sbin/logrotate") else None)
    if path:
        return path
    why = "logrotate is not installed (scripts/install-deps.sh installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def snippet_for(out, state_pid):
    """The shipped snippet for this test's file: same options, a path under
    tmp, room for every rotation, and a postrotate that signals this jankbpf
    (the shipped one asks systemd, which is not PID 1 here)."""
    text = open(SNIPPET).read()
    directives = [l.strip() for l in text.splitlines() if not l.strip().startswith("#")]
    assert "copytruncate" not in directives, "copytruncate loses the lines written while it copies"
    assert "/var/log/jankbpf/janks.jsonl {" in text
    text = text.replace("/var/log/jankbpf/janks.jsonl {", f"{out} {{")
    text = text.replace("rotate 8", "rotate 1000")
    lines, skip = [], False
    for line in text.splitlines():
        if line.strip() == "postrotate":
            lines += [line, f"\t\tkill -HUP {state_pid}"]
            skip = True
        elif line.strip() == "endscript":
            lines.append(line)
            skip = False
        elif not skip:
            lines.append(line)
    return "\n".join(lines) + "\n"


def read_all(directory):
    """Every JSON line in every file of the directory, and which file it was in."""
    records = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not name.startswith("janks.jsonl"):
            continue
        opener = gzip.open if name.endswith(".gz") else open
        with opener(path, "rt") as f:
            data = f.read()
        assert data == "" or data.endswith("\n"), f"{name}: a partial last line"
        for line in data.splitlines():
            records.append((name, json.loads(line)))
    return records


def test_rotation_under_load_loses_and_duplicates_nothing(tmp_path):
    logrotate = logrotate_or_skip()
    outdir = tmp_path / "out"
    outdir.mkdir()
    out = outdir / "janks.jsonl"
    truth = tmp_path / "truth.jsonl"
    argv = target_mod.command(f"sleep:30x{TASKS}", gap_ms=10, start_delay=3.5, truth=truth)
    # 150 janks in ~10 s from one process: over --record-rate's default 10
    # a second, which would hold records back (counted, not lost); this test
    # is of the rotation, so no limit.
    jb = Jankbpf("-v", "--output", str(out), "--threshold", str(THRESHOLD), "--log-type", "1",
                 "--ignore-startup-time", "3", "--record-rate", "0", "--", *argv)
    conf = tmp_path / "logrotate.conf"
    conf.write_text(snippet_for(out, jb.proc.pid))
    state = tmp_path / "logrotate.state"
    target = target_mod.Target.follow(truth)
    target.wait_ready(15)

    rotations = 0
    while target.done is None and jb.proc.poll() is None:
        time.sleep(0.25)
        if out.exists() and out.stat().st_size > 0:
            subprocess.run([logrotate, "-f", "-s", str(state), str(conf)], check=True,
                           capture_output=True, timeout=30)
            rotations += 1
    rc = jb.wait(timeout=30)
    target.kill()
    assert rc == 0, jb.stderr

    records = read_all(outdir)
    janks = [r for _, r in records if r["type"] == "jank" and r["pid"] == target.pid]
    keys = [(r["tid"], r["task_seq"]) for r in janks]
    long_tasks = target.long_tasks(THRESHOLD)
    files_with_janks = {name for name, r in records if r["type"] == "jank"}
    summaries = [r for _, r in records if r["type"] == "summary"]
    print(f"rotations {rotations}, files {len(files_with_janks)}, janks {len(janks)}, "
          f"truth {len(long_tasks)}, records {len(records)}")

    assert rotations >= 5, "the run was too short to rotate while janks arrived"
    assert len(files_with_janks) >= 3, "janks did not spread over rotated files"
    # The last HUP may land while jankbpf is already stopping (the target is
    # done); its lines then stay in the renamed file, still counted below.
    assert jb.stderr.count("SIGHUP: reopened") >= rotations - 1, jb.stderr
    assert len(keys) == len(set(keys)), "a jank was written twice"
    assert len(long_tasks) == TASKS
    assert len(janks) == TASKS, f"{TASKS - len(janks)} janks lost"
    assert len(summaries) == 1
    assert summaries[0]["janks"] == len([r for _, r in records if r["type"] == "jank"])
    assert summaries[0]["lost_events"] == 0
