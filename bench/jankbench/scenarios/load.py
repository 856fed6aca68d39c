"""Sections 1, 6 and 2: throughput of redis and the ping-pong pair, the
syscall tax on an unwatched process, and the per-hook cost, each with
nothing attached / jankbpf / jankbpf --log-type 2 / bench/jank.bt."""
from __future__ import annotations

import time

from .. import config
from ..peers import Bpftrace, PingPong, Redis, getppid_argv, getppid_ns
from ..procs import (bpf_prog_ids, foreign_tracers, perf_attachments, proc_age_s, prog_names,
                     prog_stats, read_sysctl, say, write_sysctl)
from ..runner import Jankbpf

# "jankbpf-nostacks" is jankbpf --log-type 2 (traces only, no stack
# sampling or off-CPU captures): it shows what the stack machinery costs.
CONFIGS = ["none", "jankbpf", "jankbpf-nostacks", "bpftrace"]
# Throughput also runs jankbpf with its ftrace instance recording all along
# (--trace-recorder always, the only way before 4ebf202): what the
# on-demand recorder saves, in the same run.
THROUGHPUT_CONFIGS = CONFIGS + ["jankbpf-flight"]


def attach(cfg: str):
    if cfg == "jankbpf":
        return Jankbpf()
    if cfg == "jankbpf-nostacks":
        return Jankbpf("--log-type", "2")
    if cfg == "jankbpf-flight":
        return Jankbpf("--trace-recorder", "always")
    if cfg == "bpftrace":
        return Bpftrace(config.JANK_BT, str(config.THRESHOLD_MS), expect_tracepoints=14)
    if cfg == "floor":
        return Bpftrace(config.FLOOR_BT, expect_tracepoints=5)
    return None


def detach(cfg: str, tool) -> dict:
    """Stops a tool; jankbpf's summary, {} for the others."""
    if cfg.startswith("jankbpf"):
        return tool.finish()
    if tool is not None:
        tool.stop()
    return {}


class Workloads:
    """redis-server and the ping-pong pair, started once for every scenario
    that needs them, with each redis workload's request count calibrated."""

    def __init__(self):
        self.redis = self.pp = None
        self.redis = Redis()
        self.pp = PingPong()
        self.started = time.monotonic()
        say(f"redis-server on 127.0.0.1:{self.redis.port}, pingpong pair {self.pp.pids}, "
            f"pinned to CPU {config.PIN_CPU}")
        self.list = [
            {"name": "redis SET", "kind": "redis", "test": "set", "pipeline": 1},
            {"name": "redis GET", "kind": "redis", "test": "get", "pipeline": 1},
            {"name": "redis SET -P 16", "kind": "redis", "test": "set", "pipeline": 16},
            {"name": "redis GET -P 16", "kind": "redis", "test": "get", "pipeline": 16},
            {"name": "ping-pong", "kind": "pingpong"},
        ]
        self._calibrate()

    def _calibrate(self) -> None:
        """Picks each redis workload's request count for about RUN_S seconds."""
        for w in self.list:
            if w["kind"] != "redis":
                continue
            probe_n = 20000 if w["pipeline"] == 1 else 200000
            if config.QUICK:
                probe_n //= 4
            r = self.redis.run(w["test"], w["pipeline"], probe_n)
            w["n"] = max(5000, int(r["rate"] * config.RUN_S) // 1000 * 1000)

    def ready(self) -> None:
        """jankbpf does not check a process in its first 10 s: make sure the
        servers are older than that (they are, unless everything before was fast)."""
        left = 11 - (time.monotonic() - self.started)
        if left > 0:
            time.sleep(left)
        for pid in [self.redis.pid, *self.pp.pids]:
            assert proc_age_s(pid) > 10

    def run(self, w) -> dict:
        if w["kind"] == "redis":
            return self.redis.run(w["test"], w["pipeline"], w["n"])
        return self.pp.run(config.RUN_S)

    def commands(self) -> list[str]:
        """The workloads' command lines, as run (PORT: the loopback port)."""
        out = [config.disp(self.redis.argv).replace(str(self.redis.port), "PORT")]
        out += [config.disp(self.redis.bench_argv(w["test"], w["pipeline"], w["n"], port="PORT"))
                for w in self.list if w["kind"] == "redis"]
        out.append(config.disp(self.pp.argv) + f"   # pins itself to CPU {config.PIN_CPU}; "
                   f"stdin: 'run {int(config.RUN_S * 1000)}' per measurement")
        return out

    def close(self) -> None:
        if self.pp:
            self.pp.stop()
        if self.redis:
            self.redis.stop()


def throughput(ctx) -> dict:
    wl = ctx.workloads()
    wl.ready()
    say(f"1. throughput, {config.ROUNDS} rounds of {' '.join(THROUGHPUT_CONFIGS)}")
    data = {cfg: {w["name"]: [] for w in wl.list} for cfg in THROUGHPUT_CONFIGS}
    summaries = []
    for r in range(config.ROUNDS):
        for cfg in THROUGHPUT_CONFIGS:
            tool = attach(cfg)
            try:
                own = bpf_prog_ids(tool.pid) if tool else set()
                foreign = foreign_tracers(own)
                runs = [wl.run(w) for w in wl.list]
                foreign = max(foreign, foreign_tracers(own))
                for w, res in zip(wl.list, runs):
                    res["foreign"] = foreign
                    data[cfg][w["name"]].append(res)
            finally:
                if tool is not None:
                    s = detach(cfg, tool)
                    if cfg == "jankbpf":
                        summaries.append(s)
        say(f"  round {r + 1}/{config.ROUNDS} done")
    return {"rounds": config.ROUNDS, "run_s": config.RUN_S, "configs": THROUGHPUT_CONFIGS,
            "workloads": wl.list, "data": data, "jankbpf_summaries": summaries,
            "pin_cpu": config.PIN_CPU, "commands": wl.commands() + [
                "build/jankbpf                                   # B: every process, defaults",
                "build/jankbpf --log-type 2                      # C: no stacks",
                f"bpftrace -B line bench/jank.bt {config.THRESHOLD_MS}            # D",
                "build/jankbpf --trace-recorder always           # E: the flight recorder"]}


def tax(ctx) -> dict:
    """ns per getppid() in a process that never waits, so is never watched.
    Host noise moves this figure by 10-50% over seconds, so each round is a
    tight A B A C A D A sequence and a tool's tax is its figure minus the
    mean of the baselines just before and after it."""
    say(f"6. syscall tax, {config.ROUNDS} rounds")
    tools = [c for c in CONFIGS if c != "none"]
    res = {"none": [], **{c: [] for c in tools}, "tax": {c: [] for c in tools}}
    for _ in range(config.ROUNDS):
        before = getppid_ns()
        res["none"].append(before)
        for cfg in tools:
            tool = attach(cfg)
            try:
                time.sleep(0.2)
                v = getppid_ns()
            finally:
                detach(cfg, tool)
            after = getppid_ns()
            res[cfg].append(v)
            res["none"].append(after)
            res["tax"][cfg].append(v - (before + after) / 2)
            before = after
    res.update(rounds=config.ROUNDS, calls=config.GETPPID_N, reps=config.GETPPID_REPS,
               configs=CONFIGS, commands=[config.disp(getppid_argv())])
    return res


def hooks(ctx) -> dict:
    wl = ctx.workloads()
    wl.ready()
    say("2. per-hook cost (kernel.bpf_stats_enabled=1)")
    old = read_sysctl("kernel.bpf_stats_enabled")
    out = {}
    write_sysctl("kernel.bpf_stats_enabled", "1")
    try:
        # "floor": empty programs and a lone clock read (bench/floor.bt),
        # what any tool's figure on this machine starts from.
        for cfg in ("jankbpf", "jankbpf-nostacks", "bpftrace", "floor"):
            tool = attach(cfg)
            try:
                names = prog_names(bpf_prog_ids(tool.pid))
                names.update({i: tp for i, tp in perf_attachments(tool.pid).items()})
                per_wl = {}
                total = {}
                for w in wl.list:
                    s0 = prog_stats(tool.pid)
                    r = wl.run(w)
                    s1 = prog_stats(tool.pid)
                    d = {i: (s1[i]["run_cnt"] - s0[i]["run_cnt"], s1[i]["run_time_ns"] - s0[i]["run_time_ns"])
                         for i in s1 if i in s0}
                    cnt = sum(c for c, _ in d.values())
                    ns = sum(t for _, t in d.values())
                    per_wl[w["name"]] = {"requests": r["n"], "calls": cnt, "ns": ns,
                                         "calls_per_req": cnt / r["n"], "ns_per_req": ns / r["n"],
                                         "cpu_us": r["cpu_us"], "client_us": r.get("client_us", 0.0)}
                    for i, (c, t) in d.items():
                        a = total.setdefault(names.get(i, str(i)), [0, 0])
                        a[0] += c
                        a[1] += t
            finally:
                summary = detach(cfg, tool)
            out[cfg] = {"per_workload": per_wl, "per_prog": total, "summary_bpf": summary.get("bpf")}
    finally:
        write_sysctl("kernel.bpf_stats_enabled", old)
    return {"tools": out, "redis_workloads": [w["name"] for w in wl.list if w["kind"] == "redis"],
            "commands": ["sysctl kernel.bpf_stats_enabled=1; bpftool -j prog show; bpftool -j perf list",
                         "bpftrace -B line bench/floor.bt"]}
