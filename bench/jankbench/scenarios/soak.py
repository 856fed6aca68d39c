"""Section 9, the soak (issue 10, item 4): jankbpf watching 20 processes
that jank 10 times a second in all, stacks on, for SOAK_MINUTES (30). What
a fleet would ask after a day: did memory stay flat after warm-up, was any
event lost, did every jank arrive, and what each jank cost jankbpf in CPU.
jankbpf writes to a file here (--output), as a service does."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time

from .. import config
from ..procs import say

PROCESSES = 20
PERIOD_S = 2.0          # one jank per process every 2 s: 10 a second in all
TASK_MS = 120
THRESHOLD_MS = 100
START_DELAY_S = 6       # jankbpf attaches in ~1 s; the first task after that
KINDS = ("spin", "sleep", "naps")  # on-CPU stacks, off-CPU captures, many switches


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def soak(ctx) -> dict:
    minutes = config.SOAK_MINUTES
    say(f"9. soak: {minutes:g} minutes, {PROCESSES} processes")
    tasks = max(3, int(minutes * 60 / PERIOD_S))
    work = tempfile.mkdtemp(prefix="jankbpf-soak-")
    targets, truths = [], []
    for i in range(PROCESSES):
        kind = KINDS[i % len(KINDS)]
        truth = open(os.path.join(work, f"truth-{i}.jsonl"), "w")
        truths.append(truth.name)
        targets.append(subprocess.Popen(
            [config.JANK_TARGET, "--script", f"{kind}:{TASK_MS}x{tasks}", "--gap",
             str(int(PERIOD_S * 1000 - TASK_MS)), "--start-delay", str(START_DELAY_S),
             "--name", f"soak-{kind}"], stdout=truth, stderr=subprocess.DEVNULL))
        truth.close()
    records_path = os.path.join(work, "records.jsonl")
    argv = [config.JANKBPF, "--ignore-startup-time", "3", "--threshold", str(THRESHOLD_MS),
            "--log-dir", os.path.join(work, "logs"), "--output", records_path]
    for t in targets:
        argv += ["--pid", str(t.pid)]
    err_path = os.path.join(work, "stderr")
    with open(err_path, "w") as err:
        jb = subprocess.Popen(argv, stderr=err)
    t0 = time.monotonic()
    rss = []  # (seconds since start, kB)
    jb_cpu = 0.0
    try:
        while jb.poll() is None:
            rss.append((time.monotonic() - t0, rss_kb(jb.pid)))
            jb_cpu = cpu_s(jb.pid)
            if time.monotonic() - t0 > minutes * 60 + 120:
                jb.send_signal(signal.SIGTERM)  # targets should have ended it
            time.sleep(5)
    except (FileNotFoundError, ProcessLookupError, IndexError):
        pass  # it exited between the poll and the read
    finally:
        if jb.poll() is None and time.monotonic() - t0 < minutes * 60 + 120:
            jb.send_signal(signal.SIGTERM)  # interrupted: stop it too
    rc = jb.wait(60)
    elapsed = time.monotonic() - t0
    for t in targets:
        if t.poll() is None:
            t.kill()
        t.wait()
    stderr = open(err_path).read()
    records = [json.loads(l) for l in open(records_path) if l.strip()]
    summary = next((r for r in records if r.get("type") == "summary"), None)
    janks = [r for r in records if r.get("type") == "jank"]
    expected = 0
    for path in truths:
        for line in open(path):
            t = json.loads(line)
            if "task" in t and t.get("dur_ns", 0) >= THRESHOLD_MS * 1_000_000:
                expected += 1
    warm_s = min(120.0, elapsed * 0.2)
    after = [kb for s, kb in rss if s >= warm_s]
    at_warm = after[0] if after else 0
    subprocess.run(["rm", "-rf", work])
    return {
        "minutes": elapsed / 60,
        "rc": rc,
        "processes": PROCESSES, "task_ms": TASK_MS, "period_s": PERIOD_S, "threshold_ms": THRESHOLD_MS,
        "expected": expected,
        "janks": len(janks),
        "stacks": sum(1 for j in janks if j.get("samples", 0) > 0),
        "off_cpu": sum(1 for j in janks if j.get("off_cpu")),
        "summary": summary or {},
        "warm_s": warm_s,
        "rss_warm_kb": at_warm,
        "rss_max_kb": max(after) if after else 0,
        "rss_end_kb": after[-1] if after else 0,
        # One reading a minute (and the last), to tell steady growth from a jump.
        "rss_by_minute": [(s, kb) for i, (s, kb) in enumerate(rss)
                          if i == len(rss) - 1 or int(s // 60) != int(rss[i + 1][0] // 60)],
        # The summary's getrusage covers the whole run; the last /proc read
        # misses up to 5 s.
        "cpu_s": (summary["cpu_user_s"] + summary["cpu_sys_s"]) if summary else jb_cpu,
        "stderr_tail": stderr.strip().splitlines()[-3:],
        "commands": [config.disp(argv[:argv.index("--pid")]).replace(work, "DIR") + " --pid PID ×20",
                     f"build/tests/jank_target --script KIND:{TASK_MS}xN --gap {int(PERIOD_S * 1000 - TASK_MS)} "
                     f"--start-delay {START_DELAY_S} --name soak-KIND   # KIND: {', '.join(KINDS)}"],
    }
