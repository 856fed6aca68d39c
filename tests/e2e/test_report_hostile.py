"""`jankbpf report` (and the live --report, --perfetto, --folded) run by
root on files an unprivileged user (uid 65534) planted, as issue 26 found
them: a stack log that is a 20,000-deep chain (O(N^2), bad_alloc at 4 GiB),
a 27-byte stack-log line claiming 4,000,000,000 samples (4e9 Perfetto
packets), traces that are FIFOs (trace-cmd blocked 60 s each), and an output
directory that is a symlink to a directory of root's."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from harness import JANKBPF, run_jankbpf

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

# The attacker's tools: it writes its files itself, as uid 65534.
PLANT = r"""
import json, os, sys
d, kind = sys.argv[1], sys.argv[2]
def record(seq, logs):
    return json.dumps({"type": "jank", "time": 1, "pid": 4242, "tid": 4242, "bundle_name": "victim",
                       "exe": "/usr/bin/victim", "duration_ms": 300.0, "threshold_ms": 150,
                       "begin_monotonic_ns": seq * 10**9, "task_seq": seq,
                       "external_log": [os.path.join(d, l) for l in logs]}) + "\n"
if kind == "stacks":
    # Every node of the chain is a leaf with one sample of its own.
    n = 20000
    with open(os.path.join(d, "stack-deep.txt"), "w") as f:
        f.write("".join(f"{n - i} #{i} pc 1 /a(f{i})\n" for i in range(n)))
    with open(os.path.join(d, "stack-count.txt"), "w") as f:
        f.write("4000000000 #0 pc 1 /a(f+1)\n")
    with open(os.path.join(d, "janks.jsonl"), "w") as f:
        f.write(record(1, ["stack-deep.txt"]) + record(2, ["stack-count.txt"]))
elif kind == "fifos":
    with open(os.path.join(d, "janks.jsonl"), "w") as f:
        for i in range(3):
            os.mkfifo(os.path.join(d, f"trace-{i}.dat"))
            f.write(record(i + 1, [f"trace-{i}.dat"]))
elif kind == "symlink":
    os.symlink(sys.argv[3], os.path.join(d, "out"))
    with open(os.path.join(d, "janks.jsonl"), "w") as f:
        f.write(record(1, []))
"""


@pytest.fixture
def attacker(tmp_path):
    """A directory of uid 65534's, and a function that plants files in it as
    that user."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="jankbpf-attacker-"))
    os.chown(d, 65534, 65534)
    os.chmod(d, 0o755)
    script = d.parent / (d.name + ".py")
    script.write_text(PLANT)
    os.chmod(script, 0o644)

    def plant(kind, *args):
        subprocess.run([*NOBODY, sys.executable, str(script), str(d), kind, *args], check=True, timeout=60)
        return d

    yield plant
    shutil.rmtree(d, ignore_errors=True)
    script.unlink()


def report(*args, memory=None, timeout=120):
    """`jankbpf report` as root; with `memory`, under that address-space
    limit (prlimit --as), as the issue measured bad_alloc."""
    cmd = [JANKBPF, "report", *args]
    if memory:
        cmd = ["prlimit", f"--as={memory}", *cmd]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"jankbpf report did not finish in {timeout} s")
    return p, time.monotonic() - t0


def test_a_deep_chain_and_a_huge_count_stay_within_bounds(attacker, tmp_path):
    d = attacker("stacks")
    print("deep chain log:", (d / "stack-deep.txt").stat().st_size, "bytes")
    out = {k: tmp_path / f"r.{k}" for k in ("html", "pftrace", "folded")}
    p, took = report(str(d / "janks.jsonl"), "-o", str(out["html"]), "--perfetto", str(out["pftrace"]),
                     "--folded", str(out["folded"]), memory=4 << 30, timeout=60)
    print(f"report took {took:.1f} s; {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    assert "2 janks and hangs, 2 stack logs read" in p.stderr
    sizes = {k: v.stat().st_size for k, v in out.items()}
    print("sizes:", sizes)
    # 4e9 claimed samples: the trace holds at most 10,000 packets per task.
    assert sizes["pftrace"] < 16 << 20 and sizes["html"] < 16 << 20


def test_traces_that_are_fifos_are_refused_at_once(attacker, tmp_path):
    d = attacker("fifos")
    p, took = report(str(d / "janks.jsonl"), "--perfetto", str(tmp_path / "r.pftrace"), timeout=45)
    print(f"report took {took:.1f} s; {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("a FIFO, not a regular file") == 3, p.stderr
    assert took < 15


@pytest.mark.parametrize("flag", ["-o", "--perfetto", "--folded"])
def test_report_outputs_refuse_a_planted_directory_symlink(attacker, tmp_path, flag):
    victim = pathlib.Path(tempfile.mkdtemp(prefix="jankbpf-victim-"))  # root's, 0700
    try:
        d = attacker("symlink", str(victim))
        p, _ = report(str(d / "janks.jsonl"), flag, str(d / "out" / "r.out"))
        assert p.returncode == 2, p.stderr
        assert '"out" is a symlink' in p.stderr, p.stderr
        assert not any(victim.iterdir()), list(victim.iterdir())
    finally:
        shutil.rmtree(victim)


@pytest.mark.parametrize("flag", ["--report", "--perfetto", "--folded"])
def test_live_report_outputs_refuse_a_planted_directory_symlink(attacker, flag):
    victim = pathlib.Path(tempfile.mkdtemp(prefix="jankbpf-victim-"))
    try:
        d = attacker("symlink", str(victim))
        rc, _, err = run_jankbpf(flag, str(d / "out" / "r.out"), "--duration", "1", "--pid", str(os.getpid()))
        assert rc == 2, err
        assert '"out" is a symlink' in err, err
        assert not any(victim.iterdir()), list(victim.iterdir())
    finally:
        shutil.rmtree(victim)
