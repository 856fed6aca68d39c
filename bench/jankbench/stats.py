"""Small pure helpers the goals and the sections share."""
from __future__ import annotations

import statistics


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def nan(x) -> bool:
    return x is None or (isinstance(x, float) and x != x)


def fmt(x, spec=".1f", none="n/a"):
    return none if nan(x) else format(x, spec)


def spread(xs, spec=".3f"):
    """median [min–max] of a list."""
    xs = [x for x in xs if not nan(x)]
    if not xs:
        return "n/a"
    return f"{format(median(xs), spec)} [{format(min(xs), spec)}–{format(max(xs), spec)}]"


def ratios(thr: dict, cfg: str, wname: str, key: str) -> list[float]:
    """Per round, a configuration's figure over the same round's baseline."""
    data = thr["data"]
    out = []
    for a, b in zip(data[cfg][wname], data["none"][wname]):
        if a.get(key) is not None and b.get(key):
            out.append(a[key] / b[key])
    return out


def avg_hook_ns(hooks: dict, cfg: str) -> tuple[float, int]:
    """(average ns per program run, runs) of one tool over every workload."""
    pr = hooks["tools"][cfg]["per_prog"]
    c = sum(v[0] for v in pr.values())
    return (sum(v[1] for v in pr.values()) / c if c else float("nan")), c


def bpf_share(v: dict) -> float:
    """BPF ns per request over the request's CPU (server + client), in %."""
    return v["ns_per_req"] / ((v["cpu_us"] + v["client_us"]) * 10)


def lane_ratio(r: dict) -> float | None:
    """Kernel lane tax: with jankbpf / the mean of the runs without it, around it."""
    base = [x for x in (r.get("before"), r.get("after")) if x]
    return r["during"] / (sum(base) / len(base)) if base and r.get("during") else None


def frame_costs(d: dict) -> dict:
    """Per-frame cost of following a Wayland client's frames (section 10):
    the client's CPU per frame with --frames on minus off (the uprobes'
    traps land there), jankbpf's own CPU per frame on minus off, each the
    best (least) of its rounds: other sessions' load only ever adds CPU time
    (cache misses, a descheduled vCPU), as the syscall tax is taken best of
    5; and per 60 Hz client, as % of one CPU."""
    per = lambda runs, key: [r[key] / r["frames"] for r in runs]  # noqa: E731
    client = min(per(d["runs"]["on"], "client_cpu_ns")) - min(per(d["runs"]["off"], "client_cpu_ns"))
    own = min(per(d["runs"]["on"], "jankbpf_cpu_ns")) - min(per(d["runs"]["off"], "jankbpf_cpu_ns"))
    total = client + own
    return {"client_ns": client, "jankbpf_ns": own, "frame_ns": total, "pct_60hz": total * 60 / 1e9 * 100}


def where_per_request(d: dict, cfg: str, workload: str) -> list[dict]:
    """Per round, each bucket's CPU µs per request (section 1b's data)."""
    us = d["period_ns"] / 1e3
    out = []
    for run in d["runs"][cfg][workload]:
        n = run["n"] or 1
        row = {k: v * us / n for k, v in run["buckets"].items()}
        row["switches"] = run["switches"] / n
        out.append(row)
    return out


def where_added(d: dict, cfg: str, workload: str, key: str) -> float:
    """Median over rounds of what cfg adds to one bucket's µs per request,
    against the same round's baseline."""
    tool, base = where_per_request(d, cfg, workload), where_per_request(d, "none", workload)
    return median([t.get(key, 0.0) - b.get(key, 0.0) for t, b in zip(tool, base)])


def where_symbols_added(d: dict, cfg: str, workload: str) -> list[tuple[str, float]]:
    """The server's leaf functions by what cfg adds to their µs per request
    (mean over rounds, against the same round's baseline), most first."""
    us = d["period_ns"] / 1e3
    tool, base = d["runs"][cfg][workload], d["runs"]["none"][workload]
    pairs = [(t, b) for t, b in zip(tool, base) if "symbols" in t and "symbols" in b]
    if not pairs:
        return []
    added: dict[str, float] = {}
    for t, b in pairs:
        for k in set(t["symbols"]) | set(b["symbols"]):
            v = t["symbols"].get(k, 0) * us / (t["n"] or 1) - b["symbols"].get(k, 0) * us / (b["n"] or 1)
            added[k] = added.get(k, 0.0) + v / len(pairs)
    # Ties by name: a set's order changes with the hash seed, a render must not.
    return sorted(((k, v) for k, v in added.items() if v > 0), key=lambda kv: (-kv[1], kv[0]))


def where_server_added(d: dict, cfg: str, workload: str) -> float:
    """Median over rounds of what cfg adds to the server's whole CPU per
    request (all its buckets), against the same round's baseline."""
    total = lambda rs: [sum(v for k, v in r.items() if k in d["server_kinds"]) for r in rs]
    tool, base = total(where_per_request(d, cfg, workload)), total(where_per_request(d, "none", workload))
    return median([t - b for t, b in zip(tool, base)])


def reach_share(d, key: str) -> str:
    """'X of Y sampling periods (N samples)' of a stack-log share: the tree
    counts periods (an off-CPU capture weighs those it slept). Data stored
    before the scenarios kept the periods has samples only: said so when
    its count of periods is above them."""
    reach, samples = d[key], d["log_samples"]
    if "log_periods" in d:
        extra = f" ({samples} samples)" if d["log_periods"] != samples else ""
        return f"{reach} of {d['log_periods']} logged sampling periods{extra}"
    if reach > samples:
        return (f"{reach} logged sampling periods (of {samples} samples; this run stored no count of the "
                f"periods they weigh)")
    return f"{reach} of {samples} logged samples"
