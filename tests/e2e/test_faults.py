"""Faults jankbpf must survive (issue 10, item 2): its own SIGKILL, a target
killed mid-task, a full log disk, a reader that closes or stops reading its
output, and a binary replaced while it is being sampled. Real processes,
real mounts, real pipes."""
import os
import shutil
import signal
import subprocess
import time

import pytest

from harness import BUILD, Jankbpf, held_bpf_ids, run_jankbpf, still_loaded
from target import Target, command

IGNORE = "3"
START_DELAY = 4
STACK_LOOP = os.path.join(BUILD, "tests", "stack_loop")


def janks_of(records):
    return [r for r in records if r.get("type") == "jank"]


def test_sigkilled_jankbpf_leaves_nothing_and_the_next_run_works(tmp_path):
    with Target.start("spin:300,spin:300x30", start_delay=START_DELAY) as target:
        jb = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE,
                     "--log-dir", str(tmp_path))
        progs, links = held_bpf_ids(jb.proc.pid)
        assert progs and links
        target.wait_tasks(1, timeout=30)
        # Killed mid-run, while it samples stacks of a spinning task.
        jb.proc.send_signal(signal.SIGKILL)
        jb.proc.wait(10)
        left_progs, left_links = still_loaded(progs, links)
        assert not left_progs and not left_links, "SIGKILL left BPF programs or links"
        jb2 = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE,
                      "--log-dir", str(tmp_path))
        jank = jb2.wait_for(lambda r: r.get("type") == "jank", timeout=15)
        assert jank is not None, f"the next run reported nothing: {jb2.stderr}"
        assert jank["samples"] > 0, jank
        assert jb2.stop() == 0
        assert jb2.summary()["lost_events"] == 0


def test_target_killed_mid_task_is_reported_unrecovered_with_its_stacks(tmp_path):
    with Target.start("spin:100,spin:5000", start_delay=START_DELAY) as target:
        jb = Jankbpf("--pid", str(target.pid), "--ignore-startup-time", IGNORE,
                     "--log-dir", str(tmp_path))
        target.wait_tasks(1, timeout=30)
        time.sleep(0.8)  # inside the 5 s task, sampled
        os.kill(target.pid, signal.SIGKILL)
        rc = jb.wait(timeout=15)  # the only --pid target is gone
    assert rc == 0, jb.stderr
    (jank,) = jb.of_type("jank", target.pid)
    assert jank["unrecovered"] is True
    assert 500 <= jank["duration_ms"] < 3000, jank["duration_ms"]
    assert jank["samples"] > 0 and jank["heaviest_stack"], jank
    (exit_rec,) = jb.of_type("exit", target.pid)
    assert exit_rec["exit_code"] == 128 + signal.SIGKILL, exit_rec
    assert jb.summary()["lost_events"] == 0


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_unwritable_log_disk_is_reported_and_records_keep_coming(tmp_path, fault):
    logs = tmp_path / "logs"
    logs.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(logs)], check=True)
    try:
        fd = os.open(logs / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:  # fill it: ENOSPC from here on
            while fault == "full" and os.write(fd, b"x" * 4096) > 0:
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        if fault == "read-only":  # EROFS, which root's permissions do not get around
            subprocess.run(["mount", "-o", "remount,ro", str(logs)], check=True)
        rc, records, err = run_jankbpf("--ignore-startup-time", IGNORE, "--log-type", "1",
                                       "--log-dir", str(logs), "--report-times-per-app", "1",
                                       "--", STACK_LOOP, "3.3", "deep:300", "ab:300:100")
        left = sorted(os.listdir(logs))
    finally:
        subprocess.run(["umount", str(logs)], check=True)
    assert rc == 0, err
    janks = janks_of(records)
    assert len(janks) == 2, "an unwritable disk must not lose janks"
    why = {"full": "No space left on device", "read-only": "Read-only file system"}[fault]
    # One stack report a day, but a write that failed spends none of it:
    # the second jank (a different stack) tries its log too.
    for j in janks:
        assert j["heaviest_stack"], "the record still carries its stack"
        assert j["external_log"] == [], j["external_log"]
        assert why in j.get("log_error", ""), j
    assert left == ["filler"], f"a partial log was left behind: {left}"


def test_closed_stdout_ends_the_run_and_says_so():
    r, w = os.pipe()
    with Target.start("spin:200x20", start_delay=START_DELAY) as target:
        jb = subprocess.Popen([os.path.join(BUILD, "jankbpf"), "--pid", str(target.pid),
                               "--ignore-startup-time", IGNORE, "--log-type", "1",
                               "--log-dir", "/tmp"],
                              stdout=w, stderr=subprocess.PIPE, text=True)
        os.close(w)
        os.close(r)  # the reader is gone before the first record
        try:
            rc = jb.wait(30)
        except subprocess.TimeoutExpired:
            jb.kill()
            pytest.fail("jankbpf kept running with its output closed")
        err = jb.stderr.read()
    assert rc == 0, err
    assert "could not be written" in err, err
    assert "detached" in err


def test_stalled_reader_does_not_hold_up_stop(tmp_path):
    """A reader that stops reading fills the pipe; SIGTERM must still end
    the run promptly, and the records it could not hand over are counted."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    with Target.start("spin:60x400", gap_ms=5, start_delay=START_DELAY) as target:
        jb = subprocess.Popen([os.path.join(BUILD, "jankbpf"), "--pid", str(target.pid),
                               "--ignore-startup-time", IGNORE, "--threshold", "50",
                               "--log-type", "1", "--log-dir", str(tmp_path)],
                              stdout=w, stderr=subprocess.PIPE, text=True)
        os.close(w)
        # Wait until the pipe is full (64 KB) and records queue behind it.
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            if len(target.tasks) >= 80:
                break
            time.sleep(0.2)
        assert len(target.tasks) >= 80, "the target did not run"
        t0 = time.monotonic()
        jb.send_signal(signal.SIGTERM)
        try:
            rc = jb.wait(10)
        except subprocess.TimeoutExpired:
            jb.kill()
            jb.wait()
            pytest.fail("jankbpf did not stop with its reader stalled")
        took = time.monotonic() - t0
        err = jb.stderr.read()
    os.close(r)
    assert rc == 0, err
    assert took < 3.0, f"stop took {took:.2f} s"
    assert "not written: the output's reader stopped reading" in err, err


def test_binary_replaced_while_sampled(tmp_path):
    """A deploy copies a new binary over the running one's path (unlink and
    write, as cp to a busy file must); jankbpf unwinds from what is mapped,
    not from what the path holds now, and does not crash."""
    binary = tmp_path / "stack_loop"
    shutil.copy(STACK_LOOP, binary)
    jb = Jankbpf("-v", "--ignore-startup-time", IGNORE, "--log-type", "1",
                 "--log-dir", str(tmp_path / "logs"), "--", str(binary), "3.3",
                 "deep:300", "deep:300", "deep:300", "deep:300")
    time.sleep(3.8)  # inside the first task
    binary.unlink()
    binary.write_bytes(b"\x7fELF" + os.urandom(4096))  # junk where the ELF was
    rc = jb.wait(timeout=30)
    assert rc == 0, jb.stderr
    janks = jb.of_type("jank")
    assert len(janks) == 4, janks
    for j in janks:
        symbols = [f["symbol"] for f in j["stack"]]
        assert "inner" in symbols and "main" in symbols, (j["samples"], j["heaviest_stack"], jb.stderr)
