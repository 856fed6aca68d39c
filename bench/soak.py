#!/usr/bin/python3
"""The soak (issue 10, item 4): jankbpf watching 20 processes that jank 10
times a second in all, stacks on, for SOAK_MINUTES (30). It reports what a
fleet would ask after a day: did memory stay flat after warm-up, was any
event lost, did every jank arrive, and what each jank cost jankbpf in CPU.

Run on its own (`sudo python3 bench/soak.py [--minutes M] [--results FILE]`)
or as the last step of `make bench` (scripts/bench.sh), which appends its
section to RESULTS.md. Exit status: 0 measured and every goal met; 1 a goal
missed or the run broke.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("JANKBPF_BUILD", os.path.join(ROOT, "build"))
JANKBPF = os.path.join(BUILD, "jankbpf")
TARGET = os.path.join(BUILD, "tests", "jank_target")

PROCESSES = 20
PERIOD_S = 2.0          # one jank per process every 2 s: 10 a second in all
TASK_MS = 120
THRESHOLD_MS = 100
START_DELAY_S = 6       # jankbpf attaches in ~1 s; the first task after that
KINDS = ("spin", "sleep", "naps")  # on-CPU stacks, off-CPU captures, many switches
RSS_GOAL_KB = 5 * 1024


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


def measure(minutes: float) -> dict:
    tasks = max(3, int(minutes * 60 / PERIOD_S))
    work = tempfile.mkdtemp(prefix="jankbpf-soak-")
    targets, truths = [], []
    for i in range(PROCESSES):
        kind = KINDS[i % len(KINDS)]
        truth = open(os.path.join(work, f"truth-{i}.jsonl"), "w")
        truths.append(truth.name)
        targets.append(subprocess.Popen(
            [TARGET, "--script", f"{kind}:{TASK_MS}x{tasks}", "--gap",
             str(int(PERIOD_S * 1000 - TASK_MS)), "--start-delay", str(START_DELAY_S),
             "--name", f"soak-{kind}"], stdout=truth, stderr=subprocess.DEVNULL))
        truth.close()
    records_path = os.path.join(work, "records.jsonl")
    argv = [JANKBPF, "--ignore-startup-time", "3", "--threshold", str(THRESHOLD_MS),
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
        "processes": PROCESSES,
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
    }


def goals(m: dict) -> list[tuple[str, str, bool]]:
    s = m["summary"]
    lost = {k: s.get(k, 0) for k in ("lost_events", "samples_lost", "offcpu_ring_full")}
    growth = m["rss_max_kb"] - m["rss_warm_kb"]
    return [
        ("RSS growth after warm-up ≤ 5 MB", f"{growth / 1024:+.1f} MB", growth <= RSS_GOAL_KB),
        ("zero lost events", ", ".join(f"{k} {v}" for k, v in lost.items()), not any(lost.values())),
        ("every jank arrives", f"{m['janks']} of {m['expected']}", m["janks"] == m["expected"]),
        ("clean exit", f"exit {m['rc']}, summary {'written' if s else 'missing'}", m["rc"] == 0 and bool(s)),
    ]


def render(m: dict) -> str:
    s = m["summary"]
    per_jank_ms = 1000 * m["cpu_s"] / m["janks"] if m["janks"] else float("nan")
    lines = [
        f"## 9. Soak: {m['minutes']:.1f} minutes, {m['processes']} processes, "
        f"10 janks a second, stacks on — measured {datetime.date.today()} by `bench/soak.py`",
        "",
        f"{m['processes']} jank_targets ({TASK_MS} ms tasks every {PERIOD_S:.0f} s each, a third "
        f"each spin, sleep and 1 ms naps), `--threshold {THRESHOLD_MS}`, default stacks and "
        f"off-CPU captures, `--pid` ×{m['processes']}; RSS read every 5 s, warm-up the first "
        f"{m['warm_s']:.0f} s.",
        "",
        "| goal | measured | met |",
        "|---|---|---|",
    ]
    for name, value, ok in goals(m):
        lines.append(f"| {name} | {value} | {'yes' if ok else '**no**'} |")
    lines += [
        "",
        "| figure | value |",
        "|---|---|",
        f"| janks (with stacks / with off-CPU captures) | {m['janks']} ({m['stacks']} / {m['off_cpu']}) |",
        f"| RSS at warm-up end / max after / at the end | {m['rss_warm_kb'] / 1024:.1f} / "
        f"{m['rss_max_kb'] / 1024:.1f} / {m['rss_end_kb'] / 1024:.1f} MB |",
        "| RSS by minute | " + ", ".join(f"{s / 60:.0f} min {kb / 1024:.0f} MB" for s, kb in m["rss_by_minute"]) + " |",
        f"| jankbpf CPU in all | {m['cpu_s']:.1f} s ({100 * m['cpu_s'] / (60 * m['minutes']):.2f} % of one CPU) |",
        f"| jankbpf CPU per jank | {per_jank_ms:.2f} ms |",
        f"| samples / stack logs / suppressed | {s.get('samples', 0)} / {s.get('stack_logs', 0)} / "
        f"{s.get('suppressed', 0)} |",
        f"| off-CPU captures / rate-limited | {s.get('offcpu_captures', 0)} / {s.get('offcpu_rate_limited', 0)} |",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", "30")))
    ap.add_argument("--results", help="append the section to this file")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("soak: needs root", file=sys.stderr)
        return 1
    for f in (JANKBPF, TARGET):
        if not os.access(f, os.X_OK):
            print(f"soak: {f} is missing: run make all apps", file=sys.stderr)
            return 1
    m = measure(a.minutes)
    md = render(m)
    print(md)
    if m["rc"] != 0 or not m["summary"]:
        print("soak: jankbpf: " + " | ".join(m["stderr_tail"]), file=sys.stderr)
    if a.results:
        with open(a.results, "a") as f:
            f.write("\n" + md)
    return 0 if all(ok for _, _, ok in goals(m)) else 1


if __name__ == "__main__":
    sys.exit(main())
