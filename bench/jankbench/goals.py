"""The table of goals. Each row: the goal's text, the issue it comes from,
the scenarios whose stored data it reads, and a function from that data
to (figure text, verdict). A verdict is True (met), False (not met), None
(reported: the goal asks for a figure, not a bound) or a text for a
qualified verdict. A goal whose data is missing is "not measured"; a
scenario kept as stored text may carry its goal rows as text too."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .stats import avg_hook_ns, bpf_share, fmt, frame_costs, lane_ratio, median, ratios


@dataclass
class Goal:
    id: str
    text: str
    issue: str
    needs: tuple[str, ...]
    judge: Callable[..., tuple[str, object]]
    fails_bench: bool = False  # a miss fails `make bench` (the soak, the fuzzers)


def _redis(thr, hooks):
    names = [w["name"] for w in thr["workloads"] if w["kind"] == "redis"]
    tp = {w: median(ratios(thr, "jankbpf", w, "rate")) for w in names}
    cpu = {w: median(ratios(thr, "jankbpf", w, "cpu_us")) for w in names}
    tp_ns = {w: median(ratios(thr, "jankbpf-nostacks", w, "rate")) for w in names}
    pw = hooks["tools"]["jankbpf"]["per_workload"]
    share = {w: bpf_share(pw[w]) for w in names if w in pw}
    fig = ("BPF share of each request's CPU (section 2, noise-free): "
           + ", ".join(f"{w} {share[w]:.1f}%" for w in share) + "; throughput, median ratio per workload: "
           + ", ".join(f"{w} {tp[w]:.3f}" for w in names) + "; server CPU/request ratio: "
           + ", ".join(f"{cpu[w]:.3f}" for w in names) + "; with --log-type 2 (no stacks): "
           + ", ".join(f"{tp_ns[w]:.3f}" for w in names))
    return fig, min(tp.values()) >= 0.99 and max(share.values()) <= 1.0


def _node_js(d):
    named = d["js_named"]
    name = d.get("first", {}).get("runnable_name", "")
    rf = d.get("runtime_frames", {})
    fig = (f"{len(named)} JS functions named in the heaviest stacks ({', '.join(named[:4])}); runnable_name "
           f"`{name}`; {rf.get('read', 0)} JS frames placed, {rf.get('unreadable', 0)} unreadable")
    return fig, any(n.startswith("busy (") for n in named) and name == "busy" and rf.get("unreadable", 0) == 0


def _pingpong(thr):
    r = {c: median(ratios(thr, c, "ping-pong", "rate")) for c in ("jankbpf", "jankbpf-nostacks", "bpftrace")}
    return (f"jankbpf {r['jankbpf']:.3f}, jankbpf --log-type 2 {r['jankbpf-nostacks']:.3f}, "
            f"bpftrace {r['bpftrace']:.3f} of baseline"), None


def _hook_150(hooks):
    avg, c = avg_hook_ns(hooks, "jankbpf")
    bt = avg_hook_ns(hooks, "bpftrace")[0]
    # The goal was set on a machine where the bpftrace script measured about
    # 250-300 ns; this shared VM's speed moves by tens of percent, so the
    # same figure scaled to that reference (275 ns) is given beside it.
    scaled = avg * 275.0 / bt if bt == bt and bt > 0 else float("nan")
    fig = (f"jankbpf {avg:.0f} ns over {c:,} runs; --log-type 2 {avg_hook_ns(hooks, 'jankbpf-nostacks')[0]:.0f} ns; "
           f"bpftrace script {bt:.0f} ns (jankbpf {avg / bt:.2f}× of it: {scaled:.0f} ns "
           f"where bpftrace measures the goal's reference 275 ns)")
    if avg <= 150 or not scaled <= 150:
        return fig, avg <= 150
    return fig, "met relative to bpftrace (not in absolute ns on this run)"


def _floor(hooks) -> str:
    """What an empty program and a lone clock read measure (bench/floor.bt), or ''."""
    pr = hooks["tools"].get("floor", {}).get("per_prog", {})
    empty = [v for k, v in pr.items() if k != "sched_wakeup" and v[0]]
    clock = pr.get("sched_wakeup")
    if not empty or not clock or not clock[0]:
        return ""
    e = sum(v[1] for v in empty) / sum(v[0] for v in empty)
    return (f"; on this machine an empty program measures {e:.0f} ns and one whose only work is a clock "
            f"read {clock[1] / clock[0]:.0f} ns (bench/floor.bt, same run)")


def _span_bound(hooks) -> str:
    """The least average any tool measuring the same tasks could reach in
    this run: each task's begin (a wait's return) must read the clock once,
    every other run costs at least an empty program (bench/floor.bt)."""
    pr = hooks["tools"].get("floor", {}).get("per_prog", {})
    runs = hooks["tools"].get("jankbpf", {}).get("per_prog", {})
    empty = [v for k, v in pr.items() if k != "sched_wakeup" and v[0]]
    clock = pr.get("sched_wakeup")
    total = sum(v[0] for v in runs.values())
    begins = sum(v[0] for k, v in runs.items() if k.startswith("sys_exit_{epoll") or k.startswith("jb_fexit"))
    if not empty or not clock or not clock[0] or not total:
        return ""
    e = sum(v[1] for v in empty) / sum(v[0] for v in empty)
    bound = (begins * clock[1] / clock[0] + (total - begins) * e) / total
    return (f"; the least average possible for these runs, each task's begin ({begins:,} runs) at the "
            f"clock read's figure and every other run at the empty program's: {bound:.0f} ns")


def _hook_80(hooks):
    avg, c = avg_hook_ns(hooks, "jankbpf")
    bt = avg_hook_ns(hooks, "bpftrace")[0]
    rel = avg / bt if bt == bt and bt > 0 else float("nan")
    fig = (f"jankbpf {avg:.0f} ns over {c:,} runs; bpftrace script {bt:.0f} ns in the same run "
           f"(jankbpf {fmt(rel, '.2f')}× of it){_floor(hooks)}{_span_bound(hooks)}")
    if avg <= 80 or not rel <= 0.5:
        return fig, avg <= 80 and rel <= 0.5
    return fig, "met relative to bpftrace (≤ 0.5×); not met in absolute ns (≤ 80)"


def _tax_30(tax):
    t = tax["tax"]
    return (f"jankbpf {median(t['jankbpf']):+.0f} ns/getppid [{min(t['jankbpf']):+.0f}…{max(t['jankbpf']):+.0f}] "
            f"(bpftrace {median(t['bpftrace']):+.0f} ns)"), median(t["jankbpf"]) <= 30


def _lane_tax(lane):
    k = lane["kinds"]
    tr, tp = lane_ratio(k.get("trampoline", {})), lane_ratio(k.get("tracepoint", {}))
    fig = (f"trampolines {fmt(tr, '.3f')}×; the tracepoint fallback {fmt(tp, '.3f')}× "
           f"(kernel {lane.get('kernel')}, one boot)")
    return fig, (tr <= 1.05) if tr is not None else False


def _attach(limit):
    def judge(st):
        return (f"median {median(st['jankbpf']):.0f} ms (worst {max(st['jankbpf']):.0f} ms)",
                median(st["jankbpf"]) <= limit)
    return judge


def _idle(foot):
    idle, widle = foot["idle"], foot["watch_idle"]
    return (f"watching one idle process: {widle['cpu_s'] * 1e3:.2f} ms CPU, "
            f"{widle['vol'] + widle['nonvol']} context switches in {widle['secs']} s; watching every "
            f"process on this (shared) machine: {idle['cpu_s'] * 1e3:.1f} ms CPU, "
            f"{idle['vol'] + idle['nonvol']} context switches in {idle['secs']} s, {idle['records']} records",
            widle["cpu_s"] <= 0.001 and widle["vol"] + widle["nonvol"] == 0)


def _rss(foot):
    rss = foot["nostack_summary"].get("max_rss_kb", 0) / 1024
    dflt = foot["summary"].get("max_rss_kb", 0) / 1024
    return f"{rss:.1f} MB with --log-type 2 (no stacks); {dflt:.1f} MB with the default (stacks on)", rss <= 25


def _error(acc):
    errs = [abs(e) for e in acc["errors"]]
    return (f"median {median(errs):.3f} ms, worst {fmt(max(errs) if errs else None, '.3f')} ms over {len(errs)} tasks",
            bool(errs) and max(errs) <= 1.0)


def _missed(acc):
    return (f"{len(acc['missed'])} missed of {acc['n_truth_long']}, {len(acc['spurious'])} spurious "
            f"(and {acc['n_truth_short']} tasks under the threshold)"), not acc["missed"] and not acc["spurious"]


def _hang(acc):
    h = acc["hang"]
    if not h:
        return "no hang record", False
    return (f"hang record {h['kernel_late_ms']:.3f} ms after the {acc['hang_ms']} ms mark (kernel), "
            f"{h['record_late_ms']:.1f} ms (record time), arrives {h['arrival_late_ms']:.1f} ms after",
            h["arrival_late_ms"] <= acc["check_interval_ms"])


def _unwind(st):
    sj, bu = st["jankbpf"], st["bpftrace_ustack"]
    share = fmt(bu["to_main"] / bu["samples"] * 100 if bu["samples"] else None, ".0f")
    bt = f"bpftrace ustack: {bu['to_main']} of {bu['samples']} ({share}%)"
    if not sj["log_samples"]:
        return f"jankbpf wrote no stack log; {bt}", False
    return f"jankbpf: {sj['to_main']} of {sj['log_samples']} samples in its stack log; {bt}", \
        sj["to_main"] == sj["log_samples"]


def _warm(st):
    w = st.get("warm")
    if not w:
        return "not measured", "not measured"
    us = w["us_per_sample"]
    return (f"{fmt(us, '.1f')} µs of jankbpf CPU per sample over {w['warm_samples']} samples of "
            f"{w['janks'] - 1} warm janks ({w['warm_cpu_ms']:.1f} ms)"), us is not None and us <= 50


def soak_lost(m):
    return {k: m["summary"].get(k, 0) for k in ("lost_events", "samples_lost", "offcpu_ring_full")}


def _soak_rss(m):
    growth = m["rss_max_kb"] - m["rss_warm_kb"]
    return f"{growth / 1024:+.1f} MB over {m['minutes']:.1f} min", growth <= 5 * 1024


def _soak_lost(m):
    lost = soak_lost(m)
    return ", ".join(f"{k} {v}" for k, v in lost.items()), not any(lost.values())


def _fuzz(fz):
    rows = fz["rows"]
    crashes = sum(r["crashes"] for r in rows)
    fig = f"{len(rows)} targets × {fz['runs']:,} executions: {crashes} crashes"
    return fig, fz["rc"] == 0 and bool(rows) and crashes == 0


GOALS = [
    Goal("redis-99", "redis-benchmark throughput with jankbpf ≥ 99% of baseline", "5", ("throughput", "hooks"), _redis),
    Goal("pingpong", "ping-pong worst case reported beside bpftrace", "5", ("throughput",), _pingpong),
    Goal("hook-150ns", "≤ 150 ns per hook invocation on average", "5", ("hooks",), _hook_150),
    Goal("tax-30ns", "tax on an unwatched process's syscalls ≤ 30 ns", "5", ("tax",), _tax_30),
    Goal("attach-150ms", "attached in ≤ 150 ms", "5", ("startup",), _attach(150)),
    Goal("idle-cpu", "no CPU used while idle", "5", ("footprint",), _idle),
    Goal("rss-25mb", "peak RSS ≤ 25 MB without stacks", "5", ("footprint",), _rss),
    Goal("error-1ms", "duration error ≤ 1 ms", "5", ("accuracy",), _error),
    Goal("no-missed", "no missed or spurious reports", "5", ("accuracy",), _missed),
    Goal("hang-10ms", "stuck task reported within one check interval (10 ms)", "5", ("accuracy",), _hang),
    Goal("unwind-main", "every sample of the frame-pointer-less target unwinds to main", "5", ("stacks",), _unwind),
    Goal("lane-tax", "getppid tax with jankbpf system-wide ≤ 1.05× without, on the 6.1 x86_64 lane "
         "(the tracepoint fallback beside it)", "12", ("lane_tax",), _lane_tax),
    Goal("hook-80ns", "≤ 80 ns per hook on average, and ≤ 0.5× bpftrace's figure of the same run",
         "12", ("hooks",), _hook_80),
    Goal("attach-50ms", "attached in ≤ 50 ms (median)", "12", ("startup",), _attach(50)),
    Goal("warm-sample", "jankbpf CPU per stack sample, end to end, warm, ≤ 50 µs", "12", ("stacks",), _warm),
    Goal("node-js-named", "node with no flags: its janks' stacks name the JavaScript functions, "
         "and runnable_name the one that ran", "13", ("node",), _node_js),
    Goal("v8-read-cost", "reading one sample's JavaScript frames on the ring thread (reported)", "13", ("v8",),
         lambda d: (f"warm p50 {d['p50_us']:.1f} µs, p99 {d['p99_us']:.0f} µs for {d['frames']} JS frames, "
                    f"{d['reads']:.0f} system calls", None)),
    Goal("soak-rss", "soak: RSS growth after warm-up ≤ 5 MB", "10", ("soak",), _soak_rss, True),
    Goal("soak-lost", "soak: zero lost events", "10", ("soak",), _soak_lost, True),
    Goal("soak-arrive", "soak: every jank arrives", "10", ("soak",),
         lambda m: (f"{m['janks']} of {m['expected']}", m["janks"] == m["expected"]), True),
    Goal("soak-exit", "soak: clean exit", "10", ("soak",),
         lambda m: (f"exit {m['rc']}, summary {'written' if m['summary'] else 'missing'}",
                    m["rc"] == 0 and bool(m["summary"])), True),
    Goal("frames-60hz", "following a 60 Hz Wayland client's frames costs ≤ 0.5% of one CPU", "28", ("frames",),
         lambda d: ((lambda c: (f"{c['frame_ns'] / 1000:.1f} µs a frame ({c['client_ns'] / 1000:.1f} in the client, "
                                f"{c['jankbpf_ns'] / 1000:.1f} in jankbpf): {c['pct_60hz']:.2f}% of one CPU at 60 Hz",
                                c["pct_60hz"] <= 0.5))(frame_costs(d)))),
    Goal("fuzz", "every fuzz target runs its executions without a crash, leak or timeout", "10", ("fuzz",),
         _fuzz, True),
]

VERDICT_MD = {True: "**met**", False: "**not met**", None: "reported"}


def verdict_text(v) -> str:
    if v in VERDICT_MD:
        return VERDICT_MD[v]
    return v if v == "not measured" else f"**{v}**"


def evaluate(results: dict, goals=GOALS) -> list[dict]:
    """One row per goal: goal, issue, figure, verdict (text), state (met,
    not met, reported, not measured, or a qualified verdict), scenarios."""
    rows = []
    for g in goals:
        entries = [results.get(n) for n in g.needs]
        if all(e and "data" in e for e in entries):
            try:
                figure, v = g.judge(*[e["data"] for e in entries])
            except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
                figure, v = f"not measured (the stored data lacks {e})", "not measured"
        else:
            stored = next((e["goal_rows"][g.id] for e in entries if e and g.id in e.get("goal_rows", {})), None)
            if stored:
                figure, v = stored["figure"], stored["verdict"]
                v = {"met": True, "not met": False, "reported": None}.get(v, v)
            else:
                figure, v = "—", "not measured"
        state = {True: "met", False: "not met", None: "reported"}.get(v, v) if not isinstance(v, str) else v
        rows.append({"id": g.id, "goal": g.text, "issue": g.issue, "figure": figure,
                     "verdict": verdict_text(v), "state": state, "needs": list(g.needs),
                     "fails_bench": g.fails_bench})
    return rows
