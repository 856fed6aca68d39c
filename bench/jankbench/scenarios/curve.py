"""Section 12: the cost curve (issue 30, item 5). How jankbpf's cost grows
with the work: `bench/fleet N` forks N idle event loops ("fleet_w"),
watched by `jankbpf --comm fleet_w` (its defaults otherwise: stacks on),
for N = 1, 100, 1,000, 10,000. Per N: kernel map memory (memlock of every
map jankbpf holds), jankbpf's RSS, and CPU (jankbpf's threads, schedstat,
plus its BPF programs' run time, bpf_stats) over an idle window and over a
window of 10 janks a second (5 for one process); then with N = 100, CPU per jank at 1, 10 and
100 janks a second. A jank is 160 ms in nanosleep (off the CPU, so two
cores can host 100 a second). `--record-rate 0 --record-rate-uid 0`: the
token buckets (issue 26) would otherwise refuse 100 a second from one uid,
and the curve is of the work, not of the refusal."""
from __future__ import annotations

import os
import re
import subprocess
import time

from .. import config
from ..procs import Fatal, grown, proc_counters, prog_stats, read_sysctl, say, spawn, stop, thread_cpu_ns, write_sysctl
from ..runner import Jankbpf

FLEET = os.path.join(config.BENCHBIN, "fleet")
SIZES = (1, 100, 1000, 10000)
RATES = (1, 10, 100)
SETTLE_S = 30


def map_memlock(pid: int) -> int:
    """Bytes of kernel memory charged to the maps a process holds (fdinfo)."""
    seen, total = set(), 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf-map":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = f.read()
        except OSError:
            continue
        mid, mem = re.search(r"^map_id:\s*(\d+)", info, re.M), re.search(r"^memlock:\s*(\d+)", info, re.M)
        if mid and mem and mid.group(1) not in seen:
            seen.add(mid.group(1))
            total += int(mem.group(1))
    return total


def _cpu(pid: int) -> tuple[dict, dict]:
    """jankbpf's threads' CPU ns and its BPF programs' stats, by id, now.
    Windows count them per id (procs.grown): a thread that exits or a
    program closed in between (the start's helpers, the task iterator) took
    its whole time out of a later sum, and 7fbc665's run showed -0.06 %
    CPU in the first 30 s of 100 processes."""
    return thread_cpu_ns(pid), prog_stats(pid)


class Fleet:
    def __init__(self, n: int):
        self.p = spawn([FLEET, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("ready"):
            stop(self.p)
            raise Fatal(f"fleet {n} did not start: {line!r}")

    def jank(self, rate: float, secs: float) -> int:
        self.p.stdin.write(f"jank {rate} {secs}\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        return int(line.split()[1]) if line.startswith("done") else 0

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(120)
        except (OSError, subprocess.TimeoutExpired):
            stop(self.p)


def _window(jb, fleet, rate, secs):
    c0, b0 = _cpu(jb.pid)
    n0 = len(jb.timed("jank"))
    t0 = time.monotonic()
    sent = fleet.jank(rate, secs) if rate else (time.sleep(secs) or 0)
    time.sleep(0.5 if rate else 0)  # the last janks end and are reported
    c1, b1 = _cpu(jb.pid)
    return {"secs": round(time.monotonic() - t0, 3), "asked": sent, "janks": len(jb.timed("jank")) - n0,
            "jankbpf_cpu_ns": grown(c0, c1), "bpf_ns": grown(b0, b1, "run_time_ns")}


def _one(n: int, rates: tuple[float, ...], secs: float) -> dict:
    say(f"12. cost curve: {n} watched processes")
    fleet = Fleet(n)
    try:
        time.sleep(3.2)  # older than --ignore-startup-time 3
        jb = Jankbpf("--comm", "fleet_w", "--ignore-startup-time", "3", "--record-rate", "0",
                     "--record-rate-uid", "0")
        # The first 30 s: the start's work and the JVM looks of --comm targets
        # (0.1 ... 12.8 s apart, 25.5 s in all: app/jvm_targets.h); then the
        # steady state.
        c0, b0 = _cpu(jb.pid)
        time.sleep(SETTLE_S)
        c1, b1 = _cpu(jb.pid)
        row = {"processes": n,
               "settle": {"secs": SETTLE_S, "jankbpf_cpu_ns": grown(c0, c1), "bpf_ns": grown(b0, b1, "run_time_ns")},
               "idle": _window(jb, fleet, 0, secs)}
        row["rates"] = {str(r): _window(jb, fleet, r, secs) for r in rates}
        row["map_bytes"] = map_memlock(jb.pid)
        row["rss_kb"] = proc_counters(jb.pid).get("rss_kb")
        summary = jb.finish()
        row["hwm_kb"] = summary.get("max_rss_kb")
        # Every count of something not done (a full map, a lost event, a
        # refused record): what the curve costs in coverage, if anything.
        row["lost"] = {k: v for k, v in summary.items()
                       if isinstance(v, int) and v and any(w in k for w in ("lost", "full", "untracked", "dropped",
                                                                            "limited", "evicted", "failures"))}
        row["features_missing"] = summary.get("features_missing", [])
        row["stop_s"] = jb.stop_s
        return row
    finally:
        fleet.close()


def curve(ctx) -> dict:
    if not os.path.exists(FLEET):
        raise Fatal(f"{FLEET} is missing (scripts/bench.sh builds bench/*.c)")
    secs = 4 if config.QUICK else 10
    was = read_sysctl("kernel.bpf_stats_enabled")
    write_sysctl("kernel.bpf_stats_enabled", "1")
    try:
        # One process cannot serve 10 janks of 160 ms a second: it gets 5.
        rows = [_one(n, (10 if n > 1 else 5,), secs) for n in SIZES]
        per_jank = _one(100, RATES, secs)
    finally:
        write_sysctl("kernel.bpf_stats_enabled", was)
    return {"secs": secs, "sizes": rows, "per_jank": per_jank}
